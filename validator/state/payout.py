"""The weights room: the weights last accepted on chain and where they sent the emission."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass

from scoring.margin import Payout

Accepted = tuple[int, dict[int, float], tuple[Payout, int | None] | None]
"""An accepted weight-set: its block, the weights by uid, and its payout with the burn uid."""


@dataclass(frozen=True, slots=True)
class PaidOut:
    """Where an accepted weight-set sent the emission (:func:`scoring.margin.margin_weights`)."""

    block: int
    payout: Payout
    burn_uid: int | None = None
    """The uid that took the burned part, when :attr:`payout` is ``burn``."""


def write(conn: sqlite3.Connection, accepted: Accepted) -> None:
    block, weights, payout = accepted
    if payout is not None:
        conn.execute(
            "INSERT OR REPLACE INTO payout (slot, block, kind, burn_uid) VALUES (0, ?, ?, ?)",
            (block, str(payout[0]), payout[1]),
        )
    conn.execute("DELETE FROM weights")
    conn.executemany("INSERT INTO weights (uid, weight) VALUES (?, ?)", sorted(weights.items()))
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('last_weights_block', ?)", (block,))


def last_payout(conn: sqlite3.Connection) -> PaidOut | None:
    row = conn.execute("SELECT block, kind, burn_uid FROM payout").fetchone()
    return None if row is None else PaidOut(row[0], Payout(row[1]), row[2])


def last_weights(conn: sqlite3.Connection) -> dict[int, float]:
    return dict(conn.execute("SELECT uid, weight FROM weights ORDER BY uid").fetchall())


def accepted(block: int, weights: Mapping[int, float], payout: Payout | None, burn_uid: int | None) -> Accepted:
    return block, dict(weights), None if payout is None else (payout, burn_uid)
