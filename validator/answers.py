"""What the validator keeps to tell copies from originals (docs/scoring.md, "Copies and
variants by first commit"): each miner's window of answers, step by step, and when each
hotkey was first seen sending each answer.

Two tables, apart from the rest of the state so that they port as they are (one
migration that creates them; nothing else reads or writes them):

- **answers**: per uid, its last ``window`` steps: the block, the hotkey, its S, its
  margin over the reference (``NULL`` without a reference score), its plan's canonical
  digest and its outcome key (:func:`scoring.margin.outcome_key`). A new hotkey on the
  uid starts afresh.
- **first_seen**: per (hotkey, answer key: a digest or an outcome key), the first and
  the last block it was seen sending it; a row unseen for the records' retention is
  deleted.

:func:`claims` turns them into first-commit order for :func:`scoring.margin.leaders`.
Functions take the state's connection inside its transaction; they do no I/O of their own.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from scoring.margin import Entry

__all__ = ["SCHEMA", "Answered", "claims", "first_commit_order", "forget_before", "record", "windows"]

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS answers (
        uid INTEGER NOT NULL, block INTEGER NOT NULL, hotkey TEXT NOT NULL, s REAL NOT NULL, margin REAL,
        digest TEXT, outcome TEXT, PRIMARY KEY (uid, block))""",
    """CREATE TABLE IF NOT EXISTS first_seen (
        hotkey TEXT NOT NULL, answer TEXT NOT NULL, first_block INTEGER NOT NULL, last_block INTEGER NOT NULL,
        PRIMARY KEY (hotkey, answer))""",
    "CREATE INDEX IF NOT EXISTS first_seen_last ON first_seen (last_block)",
)


@dataclass(frozen=True, slots=True)
class Answered:
    """One miner's answer on a step, as these tables keep it."""

    uid: int
    hotkey: str
    score: float
    margin: float | None
    digest: str | None
    outcome: str | None

    def answer_keys(self) -> list[str]:
        return [key for key in (self.digest, self.outcome) if key is not None]


def record(conn: sqlite3.Connection, block: int, answered: Iterable[Answered], window: int) -> None:
    """Add one step's answers at ``block``: each to its uid's window (the oldest beyond
    ``window`` dropped, another hotkey's dropped), and each of its keys seen."""
    rows = list(answered)
    conn.executemany("DELETE FROM answers WHERE uid = ? AND hotkey != ?", [(a.uid, a.hotkey) for a in rows])
    conn.executemany(
        "INSERT OR REPLACE INTO answers (uid, block, hotkey, s, margin, digest, outcome) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(a.uid, block, a.hotkey, a.score, a.margin, a.digest, a.outcome) for a in rows],
    )
    conn.executemany(
        "DELETE FROM answers WHERE uid = ? AND block <= "
        "(SELECT block FROM answers WHERE uid = ? ORDER BY block DESC LIMIT 1 OFFSET ?)",
        [(a.uid, a.uid, window) for a in rows],
    )
    conn.executemany(
        "INSERT INTO first_seen (hotkey, answer, first_block, last_block) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (hotkey, answer) DO UPDATE SET last_block = MAX(last_block, excluded.last_block)",
        [(a.hotkey, key, block, block) for a in rows for key in a.answer_keys()],
    )


def forget_before(conn: sqlite3.Connection, before: int) -> None:
    """Delete what was last seen before ``before`` (the records' retention)."""
    conn.execute("DELETE FROM first_seen WHERE last_block < ?", (before,))


def windows(conn: sqlite3.Connection) -> dict[int, tuple[str, list[Entry]]]:
    """Each uid's hotkey and window of answers, oldest first."""
    kept: dict[int, tuple[str, list[Entry]]] = {}
    for uid, block, hotkey, s, margin, digest, outcome in conn.execute(
        "SELECT uid, block, hotkey, s, margin, digest, outcome FROM answers ORDER BY uid, block"
    ):
        kept.setdefault(uid, (hotkey, []))[1].append(Entry(block, s, margin, digest, outcome))
    return kept


def claims(conn: sqlite3.Connection, kept: Mapping[int, tuple[str, Sequence[Entry]]]) -> dict[int, int]:
    """Each uid's claim to its answers: the earliest block its hotkey was first seen
    sending any answer of its window that another uid's window holds too (its first
    window block when it shares none)."""
    holders: dict[str, set[int]] = {}
    for uid, (_, entries) in kept.items():
        for entry in entries:
            for key in (entry.digest, entry.outcome):
                if key is not None:
                    holders.setdefault(key, set()).add(uid)
    result = {}
    for uid, (hotkey, entries) in kept.items():
        shared = sorted(
            {key for e in entries for key in (e.digest, e.outcome) if key is not None and len(holders[key]) > 1}
        )
        seen = []
        for start in range(0, len(shared), 500):  # SQLite's variable limit
            chunk = shared[start : start + 500]
            seen.append(
                conn.execute(
                    f"SELECT MIN(first_block) FROM first_seen WHERE hotkey = ? AND answer IN ({','.join('?' * len(chunk))})",
                    (hotkey, *chunk),
                ).fetchone()[0]
            )
        known = [block for block in seen if block is not None]
        first = min(known) if known else min((e.step for e in entries), default=0)
        result[uid] = first
    return result


def first_commit_order(claimed: Mapping[int, int], registered: Mapping[int, int | None]) -> list[int]:
    """Uids in first-commit order: earliest claim, then earliest registration, then uid."""
    never = float("inf")
    return sorted(claimed, key=lambda uid: (claimed[uid], _or(registered.get(uid), never), uid))


def _or(value: int | None, default: float) -> float:
    return default if value is None else value
