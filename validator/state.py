"""What a validator remembers between steps and across restarts, in one SQLite file.

- **windows**: the last 100 scores of each miner uid (a :class:`RollingWindow`)
  with the hotkey they belong to and how many tasks that hotkey has been scored on;
- **executions**: one record per scored miner per step — the task, its instance
  seed, the plan and its hash, the metrics, the final output, the score and the
  reason for a 0 — enough to re-score it later (:mod:`validator.audit`);
- **steps**: the blocks whose step is settled;
- **tasks**: each task's lifecycle state and the counters that move it;
- **meta**: the last block weights were set at, the last tempo closed.

A step settles in one transaction (:meth:`ValidatorState.settle_step`): its
records, window updates and step row commit together or not at all, so a
process killed at any moment leaves either the whole step or none of it. The
file opens through :func:`storage.open_shared`, so a second process (an audit,
a dashboard) can read it while the validator writes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scoring.window import RollingWindow
from storage import open_shared

WINDOW_SIZE = 100

ACTIVE, DEPRECATED, QUARANTINED, REMOVED = "active", "deprecated", "quarantined", "removed"
LIFECYCLE_STATES = (ACTIVE, DEPRECATED, QUARANTINED, REMOVED)

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS windows (
        uid INTEGER PRIMARY KEY, hotkey TEXT NOT NULL, scores TEXT NOT NULL, tasks_seen INTEGER NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS steps (
        block INTEGER PRIMARY KEY, task_id TEXT NOT NULL, miners INTEGER NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS executions (
        id INTEGER PRIMARY KEY AUTOINCREMENT, block INTEGER NOT NULL, uid INTEGER NOT NULL,
        hotkey TEXT NOT NULL, task_id TEXT NOT NULL, base_task_id TEXT NOT NULL,
        instance_seed INTEGER NOT NULL, plan_hash TEXT, plan TEXT, metrics TEXT,
        final_output TEXT, score TEXT NOT NULL, s REAL NOT NULL, reason TEXT,
        UNIQUE (block, uid))""",
    "CREATE INDEX IF NOT EXISTS executions_task ON executions (base_task_id, block)",
    """CREATE TABLE IF NOT EXISTS tasks (
        task_id TEXT PRIMARY KEY, state TEXT NOT NULL, high_tempos INTEGER NOT NULL DEFAULT 0,
        low_tempos INTEGER NOT NULL DEFAULT 0, quarantined_tempos INTEGER NOT NULL DEFAULT 0)""",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS weights (uid INTEGER PRIMARY KEY, weight REAL NOT NULL)",
)


@dataclass(frozen=True, slots=True)
class ExecutionRecord:
    """One miner's part in one step, as stored. ``plan`` is ``None`` when the miner's
    answer never became a plan; ``metrics`` when it never ran."""

    block: int
    uid: int
    hotkey: str
    task_id: str
    base_task_id: str
    instance_seed: int
    plan: dict[str, Any] | None
    metrics: dict[str, Any] | None
    final_output: Any
    score: dict[str, Any]
    reason: str | None
    id: int | None = None

    @property
    def plan_hash(self) -> str | None:
        return None if self.plan is None else plan_hash(self.plan)


def plan_hash(plan: Mapping[str, Any]) -> str:
    """sha256 of the plan's canonical JSON (sorted keys, no spaces)."""
    return hashlib.sha256(canonical_json(plan).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Lifecycle:
    """The thresholds of the benchmark lifecycle: a task is deprecated when more
    than ``share`` of its miners score above ``high`` for ``tempos`` closed tempos
    in a row, quarantined when more than ``share`` score below ``low`` as long,
    and removed after ``remove_after`` tempos in quarantine."""

    share: float = 0.70
    high: float = 0.90
    low: float = 0.10
    tempos: int = 3
    remove_after: int = 5


class ValidatorState:
    """The validator's SQLite state. One instance per process; not thread-safe."""

    def __init__(self, path: Path, *, window_size: int = WINDOW_SIZE, lifecycle: Lifecycle = Lifecycle()) -> None:
        self.path = Path(path)
        self.lifecycle = lifecycle
        self._conn = open_shared(self.path, _SCHEMA)
        self._window_size = window_size

    def close(self) -> None:
        self._conn.close()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        # IMMEDIATE takes the write lock up front, so two writers queue on the
        # busy timeout instead of failing an upgrade from a read lock.
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    # -- windows --------------------------------------------------------------------

    def window(self) -> RollingWindow:
        """Every uid's window as stored."""
        rows = self._conn.execute("SELECT uid, scores FROM windows").fetchall()
        return RollingWindow.from_dict(
            {"size": self._window_size, "scores": {str(uid): json.loads(scores) for uid, scores in rows}}
        )

    def tasks_seen(self) -> dict[int, int]:
        return dict(self._conn.execute("SELECT uid, tasks_seen FROM windows ORDER BY uid").fetchall())

    def hotkeys(self) -> dict[int, str]:
        return dict(self._conn.execute("SELECT uid, hotkey FROM windows ORDER BY uid").fetchall())

    # -- steps ----------------------------------------------------------------------

    def settle_step(self, block: int, records: Sequence[ExecutionRecord]) -> bool:
        """Store a step's records and add their scores to the windows, atomically.

        Returns ``False`` (and changes nothing) when the step at ``block`` is
        already settled, so a step replayed after a restart never counts twice.
        """
        with self._transaction() as conn:
            if conn.execute("SELECT 1 FROM steps WHERE block = ?", (block,)).fetchone():
                return False
            task_ids = {r.base_task_id for r in records}
            conn.execute(
                "INSERT INTO steps (block, task_id, miners) VALUES (?, ?, ?)",
                (block, ",".join(sorted(task_ids)), len(records)),
            )
            conn.executemany(
                """INSERT INTO executions (block, uid, hotkey, task_id, base_task_id, instance_seed,
                   plan_hash, plan, metrics, final_output, score, s, reason)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                [_execution_row(block, r) for r in records],
            )
            for record in records:
                self._add_score(conn, record)
        return True

    def _add_score(self, conn: sqlite3.Connection, record: ExecutionRecord) -> None:
        row = conn.execute("SELECT hotkey, scores, tasks_seen FROM windows WHERE uid = ?", (record.uid,)).fetchone()
        if row is None or row[0] != record.hotkey:  # a new hotkey on the uid starts afresh
            scores, seen = [], 0
        else:
            scores, seen = json.loads(row[1]), row[2]
        window = RollingWindow.from_dict({"size": self._window_size, "scores": {str(record.uid): scores}})
        window.add(record.uid, float(record.score["S"]))
        conn.execute(
            "INSERT OR REPLACE INTO windows (uid, hotkey, scores, tasks_seen) VALUES (?, ?, ?, ?)",
            (record.uid, record.hotkey, json.dumps(window.to_dict()["scores"][str(record.uid)]), seen + 1),
        )

    def last_step_block(self) -> int | None:
        return self._conn.execute("SELECT MAX(block) FROM steps").fetchone()[0]

    def steps_settled(self) -> int:
        return self._conn.execute("SELECT COUNT(*) FROM steps").fetchone()[0]

    def execution(self, record_id: int) -> ExecutionRecord | None:
        row = self._conn.execute(f"SELECT {_RECORD_COLUMNS} FROM executions WHERE id = ?", (record_id,)).fetchone()
        return None if row is None else _record(row)

    def executions(self, *, block: int | None = None) -> list[ExecutionRecord]:
        """Every stored record (of one step when ``block`` is given), oldest first."""
        where, args = ("WHERE block = ?", (block,)) if block is not None else ("", ())
        rows = self._conn.execute(f"SELECT {_RECORD_COLUMNS} FROM executions {where} ORDER BY id", args)
        return [_record(row) for row in rows.fetchall()]

    # -- weights --------------------------------------------------------------------

    def last_weights_block(self) -> int | None:
        return self._get_meta("last_weights_block")

    def weights_accepted(self, block: int, weights: Mapping[int, float]) -> None:
        """Record weights the chain accepted at ``block`` (replacing the previous set)."""
        with self._transaction() as conn:
            conn.execute("DELETE FROM weights")
            conn.executemany("INSERT INTO weights (uid, weight) VALUES (?, ?)", sorted(weights.items()))
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('last_weights_block', ?)", (block,))

    def last_weights(self) -> dict[int, float]:
        """The weights last accepted on chain, by uid."""
        return dict(self._conn.execute("SELECT uid, weight FROM weights ORDER BY uid").fetchall())

    # -- the instance secret ----------------------------------------------------------

    def instance_secret(self) -> int:
        """This validator's secret for drawing hidden instances: random, made once, kept."""
        with self._transaction() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('instance_secret', ?)", (secrets.randbits(63),)
            )
        return self._get_meta("instance_secret")

    # -- task lifecycle -------------------------------------------------------------

    def task_states(self, task_ids: Sequence[str] = ()) -> dict[str, str]:
        """Each task's state; tasks never seen before are registered as active."""
        if task_ids:
            with self._transaction() as conn:
                conn.executemany(
                    "INSERT OR IGNORE INTO tasks (task_id, state) VALUES (?, ?)", [(t, ACTIVE) for t in task_ids]
                )
        return dict(self._conn.execute("SELECT task_id, state FROM tasks ORDER BY task_id").fetchall())

    def lifecycle_counters(self) -> dict[str, dict[str, Any]]:
        rows = self._conn.execute(
            "SELECT task_id, state, high_tempos, low_tempos, quarantined_tempos FROM tasks ORDER BY task_id"
        ).fetchall()
        return {
            r[0]: {"state": r[1], "high_tempos": r[2], "low_tempos": r[3], "quarantined_tempos": r[4]} for r in rows
        }

    def close_tempo(self, tempo: int, first_block: int, last_block: int) -> dict[str, str]:
        """Move task lifecycles by what miners scored in blocks ``[first_block, last_block]``.

        Idempotent per ``tempo`` (a restart may call it twice). Returns the tasks
        whose state changed, with their new state.
        """
        rule = self.lifecycle
        changed: dict[str, str] = {}
        with self._transaction() as conn:
            done = conn.execute("SELECT value FROM meta WHERE key = 'last_closed_tempo'").fetchone()
            if done is not None and done[0] >= tempo:
                return {}
            means = _task_means(conn, first_block, last_block)
            for task_id, state, high, low, quarantined in conn.execute(
                "SELECT task_id, state, high_tempos, low_tempos, quarantined_tempos FROM tasks"
            ).fetchall():
                new = _advance(rule, state, high, low, quarantined, means.get(task_id))
                conn.execute(
                    "UPDATE tasks SET state = ?, high_tempos = ?, low_tempos = ?, quarantined_tempos = ? WHERE task_id = ?",
                    (*new, task_id),
                )
                if new[0] != state:
                    changed[task_id] = new[0]
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('last_closed_tempo', ?)", (tempo,))
        return changed

    def last_closed_tempo(self) -> int | None:
        return self._get_meta("last_closed_tempo")

    def _get_meta(self, key: str) -> int | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]


def _task_means(conn: sqlite3.Connection, first: int, last: int) -> dict[str, list[float]]:
    """Per task, each miner's mean score over the blocks (one value per hotkey)."""
    rows = conn.execute(
        "SELECT base_task_id, AVG(s) FROM executions WHERE block BETWEEN ? AND ? GROUP BY base_task_id, hotkey",
        (first, last),
    ).fetchall()
    means: dict[str, list[float]] = {}
    for task_id, mean in rows:
        means.setdefault(task_id, []).append(mean)
    return means


def _advance(
    rule: Lifecycle, state: str, high: int, low: int, quarantined: int, means: list[float] | None
) -> tuple[str, int, int, int]:
    """One closed tempo for one task: ``(state, high_tempos, low_tempos, quarantined_tempos)``.

    A task nobody scored in the tempo keeps its run counters; a quarantined task
    counts every tempo, scored or not.
    """
    if state == QUARANTINED:
        quarantined += 1
        return (REMOVED if quarantined >= rule.remove_after else QUARANTINED), high, low, quarantined
    if state != ACTIVE or not means:
        return state, high, low, quarantined
    high = high + 1 if sum(m > rule.high for m in means) > rule.share * len(means) else 0
    low = low + 1 if sum(m < rule.low for m in means) > rule.share * len(means) else 0
    if high >= rule.tempos:
        return DEPRECATED, high, low, quarantined
    if low >= rule.tempos:
        return QUARANTINED, high, low, quarantined
    return ACTIVE, high, low, quarantined


_RECORD_COLUMNS = (
    "id, block, uid, hotkey, task_id, base_task_id, instance_seed, plan, metrics, final_output, score, reason"
)


def _execution_row(block: int, r: ExecutionRecord) -> tuple:
    return (
        block, r.uid, r.hotkey, r.task_id, r.base_task_id, r.instance_seed, r.plan_hash,
        _dump(r.plan), _dump(r.metrics), _dump(r.final_output), canonical_json(r.score), float(r.score["S"]), r.reason,
    )


def _record(row: tuple) -> ExecutionRecord:
    rid, block, uid, hotkey, task_id, base, seed, plan, metrics, final_output, score, reason = row
    return ExecutionRecord(
        block=block, uid=uid, hotkey=hotkey, task_id=task_id, base_task_id=base, instance_seed=seed,
        plan=_load(plan), metrics=_load(metrics), final_output=_load(final_output), score=json.loads(score),
        reason=reason, id=rid,
    )


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces: the one JSON form hashes and comparisons use."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _dump(value: Any) -> str | None:
    return None if value is None else canonical_json(value)


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)
