"""The tasks room: each task's lifecycle, set aside by its reference's failures
(docs/validator.md, the task lifecycle)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

ACTIVE, SET_ASIDE = "active", "set_aside"
LIFECYCLE_STATES = (ACTIVE, SET_ASIDE)

SET_ASIDE_AFTER = 2
"""A task is set aside after this many steps in a row whose reference plan, run by
the validator on the instance it sent, did not succeed (docs/validator.md)."""
COOL_OFF_TEMPOS = 3
"""A set-aside task is active again this many tempos (in blocks) after it was set aside."""

_COLUMNS = "task_id, state, since_block, until_block, reason, reference_failures"
_FRESH = "state = ?, since_block = NULL, until_block = NULL, reason = NULL, reference_failures = 0"


@dataclass(frozen=True, slots=True)
class Lifecycle:
    """When a task is set aside and for how long: after ``set_aside_after`` failed
    reference runs in a row, for ``cool_off_tempos`` tempos."""

    set_aside_after: int = SET_ASIDE_AFTER
    cool_off_tempos: int = COOL_OFF_TEMPOS


@dataclass(frozen=True, slots=True)
class TaskLifecycle:
    """One task's lifecycle as stored. ``since_block``, ``until_block`` and ``reason``
    are set while the task is set aside (it is active again at ``until_block``)."""

    task_id: str
    state: str
    since_block: int | None
    until_block: int | None
    reason: str | None
    reference_failures: int


@dataclass(frozen=True, slots=True)
class ReferenceRun:
    """What the validator's reference plan did on the instance of ``task_id`` a step
    sent: ``failure`` is ``None`` when it succeeded, else why it did not."""

    task_id: str
    failure: str | None = None


def register(conn: sqlite3.Connection, task_ids: Sequence[str]) -> None:
    """Tasks never seen before start active."""
    conn.executemany("INSERT OR IGNORE INTO tasks (task_id, state) VALUES (?, ?)", [(t, ACTIVE) for t in task_ids])


def lifecycles(conn: sqlite3.Connection) -> dict[str, TaskLifecycle]:
    rows = conn.execute(f"SELECT {_COLUMNS} FROM tasks ORDER BY task_id").fetchall()
    return {row[0]: TaskLifecycle(*row) for row in rows}


def due(conn: sqlite3.Connection, block: int) -> list[str]:
    """The set-aside tasks whose cool-off has ended by ``block``."""
    return [
        row[0]
        for row in conn.execute(
            "SELECT task_id FROM tasks WHERE state = ? AND until_block <= ? ORDER BY task_id", (SET_ASIDE, block)
        ).fetchall()
    ]


def reinstate(conn: sqlite3.Connection, task_ids: Sequence[str]) -> None:
    conn.executemany(
        f"UPDATE tasks SET {_FRESH} WHERE task_id = ? AND state = ?", [(ACTIVE, t, SET_ASIDE) for t in task_ids]
    )


def reset(conn: sqlite3.Connection) -> int:
    """Every task active again with no failures counted; returns how many tasks are stored."""
    conn.execute(f"UPDATE tasks SET {_FRESH}", (ACTIVE,))
    return conn.execute("SELECT COUNT(*) FROM tasks").fetchone()[0]


def judge(conn: sqlite3.Connection, block: int, reference: ReferenceRun, tempo: int | None, rule: Lifecycle) -> None:
    """A succeeded reference run clears the task's failure count; a failed one adds
    to it and, at :attr:`Lifecycle.set_aside_after`, sets the task aside."""
    register(conn, [reference.task_id])
    if reference.failure is None:
        conn.execute("UPDATE tasks SET reference_failures = 0 WHERE task_id = ?", (reference.task_id,))
        return
    failures = conn.execute(
        "UPDATE tasks SET reference_failures = reference_failures + 1 WHERE task_id = ? RETURNING reference_failures",
        (reference.task_id,),
    ).fetchone()[0]
    if failures < rule.set_aside_after:
        return
    if tempo is None or tempo <= 0:
        raise ValueError("setting a task aside needs the tempo, to size its cool-off")
    conn.execute(
        "UPDATE tasks SET state = ?, since_block = ?, until_block = ?, reason = ? WHERE task_id = ? AND state = ?",
        (SET_ASIDE, block, block + rule.cool_off_tempos * tempo, reference.failure, reference.task_id, ACTIVE),
    )
