"""The windows room: each miner uid's last scores, credited margins (step by step, and
tallied by the world each was played in: what pay reads, :mod:`scoring.worlds`) and shares."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field

from scoring.margin import WINDOW, WORLDS, Means, window_means
from scoring.window import RollingWindow
from scoring.worlds import Tally, added, trimmed

from .records import ExecutionRecord

WINDOW_SIZE = WINDOW


@dataclass(frozen=True, slots=True)
class Standing:
    """What weights are computed from: the miners' windows as of one moment."""

    window: RollingWindow
    tasks_seen: dict[int, int]
    hotkeys: dict[int, str]
    """The hotkey each uid's window belongs to."""
    margins: dict[int, list[float]] = field(default_factory=dict)
    """Each uid's last credited margins over the reference, step by step (:mod:`scoring.margin`)."""
    tallies: dict[int, list[Tally]] = field(default_factory=dict)
    """Each uid's credited margins by world, over the last :data:`~scoring.margin.WORLDS`
    worlds (:mod:`scoring.worlds`): what its mean margin and error are read from."""
    shares: dict[int, list[float]] = field(default_factory=dict)
    """Each uid's window of shares of its answers."""

    def means(self) -> dict[int, Means]:
        """Each uid's window means (:func:`scoring.margin.window_means`): score, margin
        and their standard errors (margin 0 and error infinite before any step with a
        reference score)."""
        return {
            uid: window_means(self.window.scores(uid), self.tallies.get(uid, []))
            for uid in sorted(set(self.window.uids()) | set(self.tallies))
        }


def window(conn: sqlite3.Connection, size: int) -> RollingWindow:
    """Every uid's window as stored."""
    rows = conn.execute("SELECT uid, scores FROM windows").fetchall()
    return RollingWindow.from_dict({"size": size, "scores": {str(uid): json.loads(scores) for uid, scores in rows}})


def standing(conn: sqlite3.Connection, size: int) -> Standing:
    """Every uid's window, tasks seen and hotkey, read by one statement: a step settled
    meanwhile (by another thread or process) is in all three or in none."""
    rows = conn.execute(
        "SELECT uid, hotkey, scores, tasks_seen, margins, shares, tallies FROM windows ORDER BY uid"
    ).fetchall()
    scores = RollingWindow.from_dict({"size": size, "scores": {str(row[0]): json.loads(row[2]) for row in rows}})
    return Standing(
        scores,
        {row[0]: row[3] for row in rows},
        {row[0]: row[1] for row in rows},
        margins={row[0]: json.loads(row[4])[-size:] for row in rows},
        shares={row[0]: json.loads(row[5])[-size:] for row in rows},
        tallies={row[0]: decode_tallies(row[6]) for row in rows},
    )


def encode_tallies(window: list[Tally]) -> str:
    return json.dumps([[t.world, t.n, t.total] for t in window])


def decode_tallies(text: str) -> list[Tally]:
    return [Tally(world, n, total) for world, n, total in json.loads(text)]


def add_score(conn: sqlite3.Connection, record: ExecutionRecord, size: int) -> None:
    """Add the record's score to its uid's window, and its credited margin and share
    when the step's reference produced a score; a new hotkey on the uid starts afresh."""
    row = conn.execute(
        "SELECT hotkey, scores, tasks_seen, margins, shares, tallies FROM windows WHERE uid = ?", (record.uid,)
    ).fetchone()
    if row is None or row[0] != record.hotkey:
        scores, seen, margins, shares, tallied = [], 0, [], [], []
    else:
        scores, seen, margins, shares = json.loads(row[1]), row[2], json.loads(row[3]), json.loads(row[4])
        tallied = decode_tallies(row[5])
    kept = RollingWindow.from_dict({"size": size, "scores": {str(record.uid): scores}})
    kept.add(record.uid, record.paid_S)
    if record.credit is not None and record.share is not None:
        margins, shares = [*margins, record.credit][-size:], [*shares, record.share][-size:]
        tallied = trimmed(added(tallied, record.credit, record.world_tempo), units=size, worlds=WORLDS)
    conn.execute(
        "INSERT OR REPLACE INTO windows (uid, hotkey, scores, tasks_seen, margins, shares, tallies)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            record.uid,
            record.hotkey,
            json.dumps(kept.to_dict()["scores"][str(record.uid)]),
            seen + 1,
            json.dumps(margins),
            json.dumps(shares),
            encode_tallies(tallied),
        ),
    )
