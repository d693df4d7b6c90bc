"""What a validator remembers between steps and across restarts, in one SQLite file.

- **windows**: the last 100 scores of each miner uid (a :class:`RollingWindow`)
  with the hotkey they belong to and how many tasks that hotkey has been scored on,
  and beside them the last 100 credited margins over the reference and shares of an
  answer (:mod:`scoring.margin`), of the steps whose reference produced a score;
- **executions**: one record per scored miner per step — the task as sent and the
  draw it came from (base task, instance seed, synthetic or not, hint tier, the tempo
  of a drawn family), the plan and its hash, the metrics, the final output, the score and the
  reason for a 0 — enough to re-score it later (:mod:`validator.audit`) — and the
  reference's score on the step, the margin over it, the credited margin and share, and
  the plan's canonical digest;
- **steps**: the blocks whose step is settled;
- **tasks**: each task's lifecycle: active, or set aside since a block until a
  block for a reason, and how many steps in a row its reference plan failed;
- **meta**: the last block weights were set at, the instance secret, how many step
  rows retention has deleted;
- **payout**: where the last accepted weights sent the emission (:class:`~scoring.margin.Payout`).

What a miner shapes is kept up to a size (:class:`Records`): a plan, a final output
or a score larger than :data:`ANSWER_CAP_BYTES` as canonical JSON is stored as its
sha256, its size and its first :data:`CAPPED_PREFIX_BYTES` (:class:`Capped`), and
records and step rows older than :data:`RETENTION_BLOCKS` are deleted as each step
settles, their pages reused. So the file grows by at most
:func:`step_growth_bound` per step whatever miners send.

The file is made whole or not at all (:func:`_create`): a new path gets its schema
and its instance secret before it appears. An existing file that is empty or has
lost its secret is refused (:class:`StateRefused`) unless opened with ``reset``,
which makes a new secret in it.

A write the disk refuses (full, I/O error, read-only) raises :class:`StateUnwritable`,
an infrastructure failure: the step is skipped, nothing of it stored, and
:attr:`ValidatorState.write_problem` names the cause for ``/health`` until a write
succeeds. Weights the chain accepted while the disk refused are kept in memory and
written with the next write that succeeds (:meth:`ValidatorState.weights_accepted`
never raises for the disk).

A step settles in one transaction (:meth:`ValidatorState.settle_step`): its
records, window updates, step row and what its reference run said about the
task commit together or not at all, so a process killed at any moment leaves
either the whole step or none of it. The
file opens through :func:`storage.open_shared`, so a second process (an audit,
a dashboard) can read it while the validator writes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import secrets
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.hints import HintTier
from protocol.limits import KIB, MIB
from protocol.task import SYNTHETIC_PREFIX
from scoring.composite import Score, explain
from scoring.margin import Means, Payout, window_means
from scoring.window import RollingWindow
from storage import open_shared

from .failures import InfrastructureFailure

log = logging.getLogger(__name__)

WINDOW_SIZE = 100

ANSWER_CAP_BYTES = 16 * KIB
"""The most of one plan, final output or score (canonical JSON, UTF-8) a record keeps
whole; a larger one is kept as :class:`Capped`. The largest the reference planner's
plans reach on the shipped families is about 2.7 KiB, its final outputs 0.5 KiB."""
CAPPED_PREFIX_BYTES = 1 * KIB
"""How much of a capped value a record keeps, from its start."""
RETENTION_BLOCKS = 7200
"""Records and step rows older than this many blocks (a day at 12 s a block) are
deleted when a step settles; the pages they held are reused."""
PRUNE_BATCH = 1024
"""The most records (and step rows) one step deletes, oldest first: four times the default sample, so
retention keeps up, and a backlog (a file from before retention) drains over steps
instead of in one transaction as large as the backlog."""
RECORD_BOUND_BYTES = 64 * KIB
"""What one record can add to the file: three capped values, the metrics, the reason
and the ids, with the B-tree's slack."""
STEP_BOUND_BYTES = 16 * KIB
"""What a step adds besides its records: its step row, the windows and tasks it touches."""
WAL_LIMIT_BYTES = 8 * MIB
"""The ``-wal`` file is truncated back to this size after each checkpoint
(``PRAGMA journal_size_limit``); between two, it holds at most the 4 MiB SQLite
checkpoints at plus one step's writes."""

_UNWRITABLE = {sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY}
"""Primary SQLite result codes that mean the disk refused a write."""


def step_growth_bound(miners: int) -> int:
    """The most the state file (with its ``-wal``, past the WAL's own
    :data:`WAL_LIMIT_BYTES`) grows by for a step that scored ``miners`` miners."""
    return miners * RECORD_BOUND_BYTES + STEP_BOUND_BYTES


class StateRefused(ValueError):
    """A state file the validator will not start on without ``--reset``: it is empty
    or has lost its instance secret."""


class StateUnwritable(InfrastructureFailure):
    """The disk refused a write to the state file (full, an I/O error, read-only): the
    write changed nothing."""

    def __init__(self, path: Path, error: sqlite3.Error) -> None:
        super().__init__("state", f"the state file {path} cannot be written: {error}")
        self.error = error

ACTIVE, SET_ASIDE = "active", "set_aside"
LIFECYCLE_STATES = (ACTIVE, SET_ASIDE)

SET_ASIDE_AFTER = 2
"""A task is set aside after this many steps in a row whose reference plan, run by
the validator on the instance it sent, did not succeed (docs/validator.md)."""
COOL_OFF_TEMPOS = 3
"""A set-aside task is active again this many tempos (in blocks) after it was set aside."""

_TASKS_TABLE = """CREATE TABLE IF NOT EXISTS tasks (
    task_id TEXT PRIMARY KEY, state TEXT NOT NULL, since_block INTEGER, until_block INTEGER, reason TEXT,
    reference_failures INTEGER NOT NULL DEFAULT 0)"""

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS windows (
        uid INTEGER PRIMARY KEY, hotkey TEXT NOT NULL, scores TEXT NOT NULL, tasks_seen INTEGER NOT NULL,
        margins TEXT NOT NULL DEFAULT '[]', shares TEXT NOT NULL DEFAULT '[]')""",
    """CREATE TABLE IF NOT EXISTS steps (
        block INTEGER PRIMARY KEY, task_id TEXT NOT NULL, miners INTEGER NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS executions (
        id INTEGER PRIMARY KEY AUTOINCREMENT, block INTEGER NOT NULL, uid INTEGER NOT NULL,
        hotkey TEXT NOT NULL, task_id TEXT NOT NULL, base_task_id TEXT NOT NULL,
        instance_seed INTEGER NOT NULL, synthetic INTEGER NOT NULL DEFAULT 0, hint_tier TEXT NOT NULL DEFAULT 'full',
        drawn_tempo INTEGER, plan_hash TEXT, plan TEXT, metrics TEXT,
        final_output TEXT, score TEXT NOT NULL, s REAL NOT NULL, reason TEXT, capped TEXT, world_tempo INTEGER,
        reference_s REAL, margin REAL, credit REAL, share REAL, digest TEXT,
        UNIQUE (block, uid))""",
    "CREATE INDEX IF NOT EXISTS executions_task ON executions (base_task_id, block)",
    _TASKS_TABLE,
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS weights (uid INTEGER PRIMARY KEY, weight REAL NOT NULL)",
    """CREATE TABLE IF NOT EXISTS payout (
        slot INTEGER PRIMARY KEY CHECK (slot = 0), block INTEGER NOT NULL, kind TEXT NOT NULL, burn_uid INTEGER)""",
)


@dataclass(frozen=True, slots=True)
class Capped:
    """A value too large for its record (:data:`ANSWER_CAP_BYTES`), as the record keeps it."""

    sha256: str
    """sha256 of the value's canonical JSON, hex."""
    size: int
    """Bytes of its canonical JSON (UTF-8)."""
    prefix: str
    """Its canonical JSON's first bytes (at most :data:`CAPPED_PREFIX_BYTES`)."""

    def describe(self, what: str) -> str:
        return (f"the {what} was {self.size:,} bytes, over the record cap: kept as its sha256 "
                f"{self.sha256[:16]}… and its first {len(self.prefix.encode()):,} bytes")


@dataclass(frozen=True, slots=True)
class ExecutionRecord:
    """One miner's part in one step, as stored. ``plan`` is ``None`` when the miner's
    answer never became a plan; ``metrics`` when it never ran. A plan, final output or
    score larger than the cap reads back as :class:`Capped`."""

    block: int
    uid: int
    hotkey: str
    task_id: str
    base_task_id: str
    instance_seed: int
    plan: dict[str, Any] | Capped | None
    metrics: dict[str, Any] | None
    final_output: Any
    score: dict[str, Any] | Capped
    reason: str | None
    synthetic: bool = False
    """Whether the step sent the synthetic variant of ``base_task_id``'s instance."""
    hint_tier: HintTier = "full"
    """The hint tier the task was sent at (:mod:`protocol.hints`)."""
    drawn_tempo: int | None = None
    """The tempo ``base_task_id`` was drawn for, when it is a drawn family; ``None``: curated."""
    world_tempo: int | None = None
    """The tempo whose hidden world the plan ran in (:mod:`subnets.world`); ``None``: the advertised profile."""
    reference_S: float | None = None
    """The validator's reference's ``S`` on the same instance, tier and world; ``None`` when
    the reference produced no score (it could not plan the tier, or the task runs on adapters)."""
    margin: float | None = None
    """``S − reference_S`` (``None`` without ``reference_S``)."""
    credit: float | None = None
    """The margin credited to the window: a positive margin divided among the copies of
    the answer, a loss whole (:func:`scoring.margin.credits`)."""
    share: float | None = None
    """1 ÷ the hotkeys that sent this answer on the step (1 for no valid plan)."""
    digest: str | None = None
    """The plan's canonical digest (:func:`protocol.canonical.plan_digest`); ``None``: no valid plan."""
    id: int | None = None

    def explain(self) -> str:
        """The line the validator logged for this outcome: S and its parts, or why it is 0
        (:func:`scoring.composite.explain`)."""
        if isinstance(self.score, Capped):
            return f"S=? ({self.score.describe('score')})"
        return explain(Score.model_validate(self.score), self.reason)

    @property
    def plan_hash(self) -> str | None:
        if isinstance(self.plan, Capped):
            return self.plan.sha256
        return None if self.plan is None else plan_hash(self.plan)


def plan_hash(plan: Mapping[str, Any]) -> str:
    """sha256 of the plan's canonical JSON (sorted keys, no spaces)."""
    return hashlib.sha256(canonical_json(plan).encode()).hexdigest()


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


@dataclass(frozen=True, slots=True)
class PaidOut:
    """Where an accepted weight-set sent the emission (:func:`scoring.margin.margin_weights`)."""

    block: int
    payout: Payout
    burn_uid: int | None = None
    """The uid that took the burned part, when :attr:`payout` is ``burn``."""


@dataclass(frozen=True, slots=True)
class Records:
    """What records keep: each plan, final output and score up to ``answer_cap_bytes``
    whole, for ``retention_blocks`` blocks."""

    answer_cap_bytes: int = ANSWER_CAP_BYTES
    retention_blocks: int = RETENTION_BLOCKS


@dataclass(frozen=True, slots=True)
class Standing:
    """What weights are computed from: the miners' windows as of one moment."""

    window: RollingWindow
    tasks_seen: dict[int, int]
    hotkeys: dict[int, str]
    """The hotkey each uid's window belongs to."""
    margins: dict[int, list[float]] = field(default_factory=dict)
    """Each uid's window of credited margins over the reference (:mod:`scoring.margin`)."""
    shares: dict[int, list[float]] = field(default_factory=dict)
    """Each uid's window of shares of its answers."""

    def means(self) -> dict[int, Means]:
        """Each uid's window means (:func:`scoring.margin.window_means`): score, credited
        margin (0 before any step with a reference score) and share (1 before any)."""
        return {
            uid: window_means(self.window.mean(uid), self.margins.get(uid, []), self.shares.get(uid, []))
            for uid in sorted(set(self.window.uids()) | set(self.margins))
        }


class ValidatorState:
    """The validator's SQLite state. One instance per process; not thread-safe."""

    def __init__(
        self, path: Path, *, window_size: int = WINDOW_SIZE, lifecycle: Lifecycle = Lifecycle(),
        records: Records = Records(), reset: bool = False,
    ) -> None:
        """Open the state at ``path``, made whole with a new secret when nothing is there.
        Raises :class:`StateRefused` for a file that is empty or has lost its secret,
        unless ``reset``: then a new secret is made in it."""
        self.path = Path(path)
        self.lifecycle = lifecycle
        self.records = records
        self._window_size = window_size
        self.write_problem: str | None = None
        """Why the last write failed, while it is the last write; ``None`` once one succeeds."""
        self._unrecorded_weights: tuple[int, dict[int, float], tuple[Payout, int | None] | None] | None = None
        if not self.path.exists():
            _create(self.path)
        elif self.path.stat().st_size == 0 and not reset:
            raise StateRefused(_refusal(self.path, "is empty (0 bytes)"))
        self._conn = open_shared(self.path, _SCHEMA)
        try:
            self._conn.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT_BYTES}")
            self._drop_old_lifecycle()
            self._add_synthetic_column()
            self._add_draw_columns()
            self._add_capped_column()
            self._add_margin_columns()
            self._keep_secret(reset)
        except BaseException:
            self._conn.close()
            raise

    def close(self) -> None:
        self._conn.close()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; a write the disk refuses raises :class:`StateUnwritable`.
        Weights kept in memory while the disk refused go in first (:meth:`weights_accepted`)."""
        changes = self._conn.total_changes
        try:
            # IMMEDIATE takes the write lock up front, so two writers queue on the
            # busy timeout instead of failing an upgrade from a read lock.
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                if self._unrecorded_weights is not None:
                    _write_weights(self._conn, *self._unrecorded_weights)
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                # SQLite rolls some failures back itself (a full disk among them).
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            if (getattr(exc, "sqlite_errorcode", 0) & 0xFF) not in _UNWRITABLE:
                raise
            self.write_problem = f"the state file {self.path} cannot be written: {exc}"
            raise StateUnwritable(self.path, exc) from exc
        if self._conn.total_changes != changes:
            # Only a transaction that wrote rows proves the disk takes writes again: an
            # empty one commits on a full disk too, and would hide the problem mid-step.
            self.write_problem = None
        self._unrecorded_weights = None

    # -- windows --------------------------------------------------------------------

    def window(self) -> RollingWindow:
        """Every uid's window as stored."""
        rows = self._conn.execute("SELECT uid, scores FROM windows").fetchall()
        return RollingWindow.from_dict(
            {"size": self._window_size, "scores": {str(uid): json.loads(scores) for uid, scores in rows}}
        )

    def standing(self) -> Standing:
        """Every uid's window, tasks seen and hotkey, read by one statement: a step
        settled meanwhile (by another thread or process) is in all three or in none."""
        rows = self._conn.execute(
            "SELECT uid, hotkey, scores, tasks_seen, margins, shares FROM windows ORDER BY uid").fetchall()
        window = RollingWindow.from_dict(
            {"size": self._window_size, "scores": {str(row[0]): json.loads(row[2]) for row in rows}}
        )
        return Standing(
            window, {row[0]: row[3] for row in rows}, {row[0]: row[1] for row in rows},
            margins={row[0]: json.loads(row[4])[-self._window_size:] for row in rows},
            shares={row[0]: json.loads(row[5])[-self._window_size:] for row in rows},
        )

    def tasks_seen(self) -> dict[int, int]:
        return dict(self._conn.execute("SELECT uid, tasks_seen FROM windows ORDER BY uid").fetchall())

    def hotkeys(self) -> dict[int, str]:
        return dict(self._conn.execute("SELECT uid, hotkey FROM windows ORDER BY uid").fetchall())

    # -- steps ----------------------------------------------------------------------

    def settle_step(
        self, block: int, records: Sequence[ExecutionRecord], reference: ReferenceRun | None = None,
        *, tempo: int | None = None,
    ) -> bool:
        """Store a step's records, add their scores to the windows and apply its
        reference run to the task's lifecycle (:meth:`_judge`), atomically.

        Returns ``False`` (and changes nothing) when the step at ``block`` is
        already settled, so a step replayed after a restart never counts twice.
        ``tempo`` (blocks) sizes the cool-off of a task this step sets aside.
        """
        with self._transaction() as conn:
            if conn.execute("SELECT 1 FROM steps WHERE block = ?", (block,)).fetchone():
                return False
            if reference is not None:
                self._judge(conn, block, reference, tempo)
            task_ids = {r.base_task_id for r in records}
            conn.execute(
                "INSERT INTO steps (block, task_id, miners) VALUES (?, ?, ?)",
                (block, ",".join(sorted(task_ids)), len(records)),
            )
            conn.executemany(
                """INSERT INTO executions (block, uid, hotkey, task_id, base_task_id, instance_seed, synthetic,
                   hint_tier, drawn_tempo, plan_hash, plan, metrics, final_output, score, s, reason, capped,
                   world_tempo, reference_s, margin, credit, share, digest)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                [_execution_row(block, r, self.records.answer_cap_bytes) for r in records],
            )
            for record in records:
                self._add_score(conn, record)
            self._prune(conn, block - self.records.retention_blocks)
        return True

    def _prune(self, conn: sqlite3.Connection, before: int) -> None:
        """Delete records and step rows (at most :data:`PRUNE_BATCH` of each, oldest
        first) of blocks before ``before``; the newest step row stays, so a settled step is never
        settled again. Pruned step rows are counted."""
        conn.execute(
            "DELETE FROM executions WHERE id IN (SELECT id FROM executions WHERE block < ? ORDER BY block LIMIT ?)",
            (before, PRUNE_BATCH),
        )
        pruned = conn.execute(
            "DELETE FROM steps WHERE block IN (SELECT block FROM steps WHERE block < ? "
            "AND block < (SELECT MAX(block) FROM steps) ORDER BY block LIMIT ?)", (before, PRUNE_BATCH),
        ).rowcount
        if pruned:
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('steps_pruned', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = value + excluded.value", (pruned,),
            )

    def _add_score(self, conn: sqlite3.Connection, record: ExecutionRecord) -> None:
        """Add the record's score to its uid's window, and its credited margin and share
        when the step's reference produced a score; a new hotkey on the uid starts afresh."""
        row = conn.execute(
            "SELECT hotkey, scores, tasks_seen, margins, shares FROM windows WHERE uid = ?", (record.uid,)).fetchone()
        if row is None or row[0] != record.hotkey:
            scores, seen, margins, shares = [], 0, [], []
        else:
            scores, seen, margins, shares = json.loads(row[1]), row[2], json.loads(row[3]), json.loads(row[4])
        window = RollingWindow.from_dict({"size": self._window_size, "scores": {str(record.uid): scores}})
        window.add(record.uid, float(record.score["S"]))
        if record.credit is not None and record.share is not None:
            margins, shares = self._kept_last([*margins, record.credit]), self._kept_last([*shares, record.share])
        conn.execute(
            "INSERT OR REPLACE INTO windows (uid, hotkey, scores, tasks_seen, margins, shares) VALUES (?, ?, ?, ?, ?, ?)",
            (record.uid, record.hotkey, json.dumps(window.to_dict()["scores"][str(record.uid)]), seen + 1,
             json.dumps(margins), json.dumps(shares)),
        )

    def _kept_last(self, values: list[float]) -> list[float]:
        return values[-self._window_size:]

    def last_step_block(self) -> int | None:
        return self._conn.execute("SELECT MAX(block) FROM steps").fetchone()[0]

    def steps_settled(self) -> int:
        """Every step ever settled in this file, those retention deleted included."""
        return self._conn.execute("SELECT COUNT(*) FROM steps").fetchone()[0] + (self._get_meta("steps_pruned") or 0)

    def execution(self, record_id: int) -> ExecutionRecord | None:
        row = self._conn.execute(f"SELECT {_RECORD_COLUMNS} FROM executions WHERE id = ?", (record_id,)).fetchone()
        return None if row is None else _record(row)

    def executions(
        self, *, block: int | None = None, uid: int | None = None, task_id: str | None = None, last: int | None = None
    ) -> list[ExecutionRecord]:
        """The stored records, oldest first: of one step (``block``), one miner (``uid``),
        one task (``task_id``, as sent or its base task), the ``last`` ones of those."""
        filters = {"block = ?": block, "uid = ?": uid, "(task_id = ? OR base_task_id = ?)": task_id}
        chosen = {clause: value for clause, value in filters.items() if value is not None}
        where = " AND ".join(chosen)
        args = [value for clause, value in chosen.items() for _ in range(clause.count("?"))]
        query = f"SELECT {_RECORD_COLUMNS} FROM executions {'WHERE ' + where if where else ''} ORDER BY id DESC"
        if last is not None:
            query, args = query + " LIMIT ?", [*args, last]
        return [_record(row) for row in reversed(self._conn.execute(query, args).fetchall())]

    # -- weights --------------------------------------------------------------------

    def last_weights_block(self) -> int | None:
        if self._unrecorded_weights is not None:
            return self._unrecorded_weights[0]
        return self._get_meta("last_weights_block")

    def weights_accepted(
        self, block: int, weights: Mapping[int, float], payout: Payout | None = None, *, burn_uid: int | None = None
    ) -> None:
        """Record weights the chain accepted at ``block`` (replacing the previous set).

        Never raises for the disk: weights are set on chain by then, and a validator
        that stopped here would set them again, unrecorded, at its restart. When the
        disk refuses, they are kept in memory (what :meth:`last_weights_block` and
        :meth:`last_weights` return) and written with the next write that succeeds."""
        self._unrecorded_weights = (block, dict(weights), None if payout is None else (payout, burn_uid))
        try:
            with self._transaction():
                pass  # the weights kept in memory go in first
        except StateUnwritable as exc:
            log.error("weights accepted at block %s are kept in memory until the state can be written: %s",
                      block, exc.error)

    def last_payout(self) -> PaidOut | None:
        """Where the weights last accepted on chain sent the emission; ``None`` before any
        (or when they were recorded without it)."""
        if self._unrecorded_weights is not None:
            block, _, payout = self._unrecorded_weights
            return None if payout is None else PaidOut(block, *payout)
        row = self._conn.execute("SELECT block, kind, burn_uid FROM payout").fetchone()
        return None if row is None else PaidOut(row[0], Payout(row[1]), row[2])

    def last_weights(self) -> dict[int, float]:
        """The weights last accepted on chain, by uid."""
        if self._unrecorded_weights is not None:
            return dict(sorted(self._unrecorded_weights[1].items()))
        return dict(self._conn.execute("SELECT uid, weight FROM weights ORDER BY uid").fetchall())

    # -- the instance secret ----------------------------------------------------------

    def instance_secret(self) -> int:
        """This validator's secret for drawing hidden instances: random, made with the
        file (or by ``reset``), kept."""
        secret = self._get_meta("instance_secret")
        assert secret is not None, "a state file without a secret is refused when it opens"
        return secret

    def _keep_secret(self, reset: bool) -> None:
        """Refuse a file that lost its secret, unless ``reset``: then make a new one."""
        if self._get_meta("instance_secret") is not None:
            return
        if not reset:
            raise StateRefused(_refusal(self.path, "has lost its instance secret"))
        with self._transaction() as conn:
            _new_secret(conn)
        log.warning("state file %s: a new instance secret was made (--reset)", self.path)

    # -- task lifecycle -------------------------------------------------------------

    def task_states(self, task_ids: Sequence[str] = ()) -> dict[str, str]:
        """Each task's state; tasks never seen before are registered as active."""
        return {task_id: task.state for task_id, task in self.task_lifecycles(task_ids).items()}

    def task_lifecycles(self, task_ids: Sequence[str] = ()) -> dict[str, TaskLifecycle]:
        """Every stored task's lifecycle, by id; ``task_ids`` never seen before are registered as active."""
        if task_ids:
            with self._transaction() as conn:
                conn.executemany(
                    "INSERT OR IGNORE INTO tasks (task_id, state) VALUES (?, ?)", [(t, ACTIVE) for t in task_ids]
                )
        rows = self._conn.execute(f"SELECT {_TASK_COLUMNS} FROM tasks ORDER BY task_id").fetchall()
        return {row[0]: TaskLifecycle(*row) for row in rows}

    def reinstate(self, block: int) -> list[str]:
        """Make every set-aside task whose cool-off has ended by ``block`` active again;
        returns their ids. Depends on the block alone, so calling it twice is harmless."""
        due = [row[0] for row in self._conn.execute(
            "SELECT task_id FROM tasks WHERE state = ? AND until_block <= ? ORDER BY task_id", (SET_ASIDE, block)
        ).fetchall()]
        if due:
            with self._transaction() as conn:
                conn.executemany(
                    f"UPDATE tasks SET {_FRESH} WHERE task_id = ? AND state = ?", [(ACTIVE, t, SET_ASIDE) for t in due]
                )
        return due

    def reset_tasks(self) -> int:
        """Every task active again with no failures counted; returns how many tasks are stored."""
        with self._transaction() as conn:
            conn.execute(f"UPDATE tasks SET {_FRESH}", (ACTIVE,))
            return conn.execute("SELECT COUNT(*) FROM tasks").fetchone()[0]

    def _judge(self, conn: sqlite3.Connection, block: int, reference: ReferenceRun, tempo: int | None) -> None:
        """A succeeded reference run clears the task's failure count; a failed one adds
        to it and, at :attr:`Lifecycle.set_aside_after`, sets the task aside."""
        conn.execute("INSERT OR IGNORE INTO tasks (task_id, state) VALUES (?, ?)", (reference.task_id, ACTIVE))
        if reference.failure is None:
            conn.execute("UPDATE tasks SET reference_failures = 0 WHERE task_id = ?", (reference.task_id,))
            return
        failures = conn.execute(
            "UPDATE tasks SET reference_failures = reference_failures + 1 WHERE task_id = ? RETURNING reference_failures",
            (reference.task_id,),
        ).fetchone()[0]
        if failures < self.lifecycle.set_aside_after:
            return
        if tempo is None or tempo <= 0:
            raise ValueError("setting a task aside needs the tempo, to size its cool-off")
        conn.execute(
            "UPDATE tasks SET state = ?, since_block = ?, until_block = ?, reason = ? WHERE task_id = ? AND state = ?",
            (SET_ASIDE, block, block + self.lifecycle.cool_off_tempos * tempo, reference.failure, reference.task_id,
             ACTIVE),
        )

    def _drop_old_lifecycle(self) -> None:
        """A state file from before the reference rule kept verdicts drawn from miners'
        scores (deprecated, quarantined, removed): drop them, every task starts active."""

        def drop(conn: sqlite3.Connection) -> None:
            conn.execute("DROP TABLE tasks")
            conn.execute(_TASKS_TABLE)
            conn.execute("DELETE FROM meta WHERE key = 'last_closed_tempo'")

        self._migrate(_has_lifecycle_columns, drop)

    def _add_synthetic_column(self) -> None:
        """A state file from before records stored their draw's ``synthetic`` flag:
        add the column and derive it once, here, from the variant's id prefix (a base
        task id never starts with it); from then on the record's flag is the truth."""

        def add(conn: sqlite3.Connection) -> None:
            conn.execute("ALTER TABLE executions ADD COLUMN synthetic INTEGER NOT NULL DEFAULT 0")
            conn.execute("UPDATE executions SET synthetic = 1 WHERE substr(task_id, 1, ?) = ?",
                         (len(SYNTHETIC_PREFIX), SYNTHETIC_PREFIX))

        self._migrate(_has_synthetic_column, add)

    def _add_draw_columns(self) -> None:
        """A state file from before records stored their hint tier and a drawn family's
        tempo: every old record was sent at ``full``, of a curated family."""

        def add(conn: sqlite3.Connection) -> None:
            have = _columns(conn, "executions")
            if "hint_tier" not in have:
                conn.execute("ALTER TABLE executions ADD COLUMN hint_tier TEXT NOT NULL DEFAULT 'full'")
            if "drawn_tempo" not in have:
                conn.execute("ALTER TABLE executions ADD COLUMN drawn_tempo INTEGER")
            if "world_tempo" not in have:  # before the hidden world, every plan ran on the advertised profile
                conn.execute("ALTER TABLE executions ADD COLUMN world_tempo INTEGER")

        self._migrate(_has_draw_columns, add)

    def _add_capped_column(self) -> None:
        """A state file from before records were capped: every value in it is whole."""

        def add(conn: sqlite3.Connection) -> None:
            conn.execute("ALTER TABLE executions ADD COLUMN capped TEXT")

        self._migrate(_has_capped_column, add)

    def _add_margin_columns(self) -> None:
        """A state file from before the margin over the reference: its records have none
        (their reference was never scored at their tier and world), its windows no margins."""

        def add(conn: sqlite3.Connection) -> None:
            have = _columns(conn, "executions")
            for column, kind in _MARGIN_COLUMNS.items():
                if column not in have:
                    conn.execute(f"ALTER TABLE executions ADD COLUMN {column} {kind}")
            windows = _columns(conn, "windows")
            for column in ("margins", "shares"):
                if column not in windows:
                    conn.execute(f"ALTER TABLE windows ADD COLUMN {column} TEXT NOT NULL DEFAULT '[]'")

        self._migrate(_has_margin_columns, add)

    def _migrate(
        self, done: Callable[[sqlite3.Connection], bool], apply: Callable[[sqlite3.Connection], None]
    ) -> None:
        """Apply one schema change once, in one transaction, even when several processes
        open an old file together (the check is repeated inside the transaction)."""
        if done(self._conn):
            return
        with self._transaction() as conn:
            if not done(conn):  # another process may have migrated it meanwhile
                apply(conn)

    def _get_meta(self, key: str) -> int | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]


def _has_lifecycle_columns(conn: sqlite3.Connection) -> bool:
    return "reference_failures" in _columns(conn, "tasks")


def _has_synthetic_column(conn: sqlite3.Connection) -> bool:
    return "synthetic" in _columns(conn, "executions")


def _has_draw_columns(conn: sqlite3.Connection) -> bool:
    return {"hint_tier", "drawn_tempo", "world_tempo"} <= _columns(conn, "executions")


def _has_capped_column(conn: sqlite3.Connection) -> bool:
    return "capped" in _columns(conn, "executions")


_MARGIN_COLUMNS = {"reference_s": "REAL", "margin": "REAL", "credit": "REAL", "share": "REAL", "digest": "TEXT"}


def _has_margin_columns(conn: sqlite3.Connection) -> bool:
    return _MARGIN_COLUMNS.keys() <= _columns(conn, "executions") and {"margins", "shares"} <= _columns(conn, "windows")


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})").fetchall()}


_TASK_COLUMNS = "task_id, state, since_block, until_block, reason, reference_failures"
_FRESH = "state = ?, since_block = NULL, until_block = NULL, reason = NULL, reference_failures = 0"


_RECORD_COLUMNS = (
    "id, block, uid, hotkey, task_id, base_task_id, instance_seed, synthetic, hint_tier, drawn_tempo, plan, metrics, "
    "final_output, score, reason, capped, world_tempo, reference_s, margin, credit, share, digest"
)
_CAPPED_FIELDS = ("plan", "final_output", "score")
"""The values a miner shapes, kept whole up to the cap."""


def _execution_row(block: int, r: ExecutionRecord, cap: int) -> tuple:
    kept = {field: _kept(getattr(r, field), cap) for field in _CAPPED_FIELDS}
    capped = {field: [c.sha256, c.size] for field, (_, c) in kept.items() if c is not None}
    return (
        block, r.uid, r.hotkey, r.task_id, r.base_task_id, r.instance_seed, int(r.synthetic), r.hint_tier,
        r.drawn_tempo, r.plan_hash, kept["plan"][0], _dump(r.metrics), kept["final_output"][0], kept["score"][0],
        float(r.score["S"]), r.reason, canonical_json(capped) if capped else None, r.world_tempo,
        r.reference_S, r.margin, r.credit, r.share, r.digest,
    )


def _kept(value: Any, cap: int) -> tuple[str | None, Capped | None]:
    """What a record stores of ``value``: its canonical JSON when it fits in ``cap``
    bytes, else its first bytes and the :class:`Capped` that says so."""
    if value is None:
        return None, None
    text = canonical_json(value)
    if len(text) * 4 <= cap:  # a code point is at most 4 bytes: no need to encode
        return text, None
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= cap:
        return text, None
    prefix = data[:CAPPED_PREFIX_BYTES].decode("utf-8", "ignore")
    return prefix, Capped(hashlib.sha256(data).hexdigest(), len(data), prefix)


def _record(row: tuple) -> ExecutionRecord:
    rid, block, uid, hotkey, task_id, base, seed, synthetic, tier, tempo, *values, reason, capped, world = row[:-5]
    reference_s, margin, credit, share, digest = row[-5:]
    plan, metrics, final_output, score = values
    marks = json.loads(capped) if capped else {}

    def read(field: str, text: str | None) -> Any:
        if field in marks:
            sha256, size = marks[field]
            return Capped(sha256, size, text or "")
        return _load(text)

    return ExecutionRecord(
        block=block, uid=uid, hotkey=hotkey, task_id=task_id, base_task_id=base, instance_seed=seed,
        synthetic=bool(synthetic), hint_tier=tier, drawn_tempo=tempo, plan=read("plan", plan),
        metrics=_load(metrics), final_output=read("final_output", final_output), score=read("score", score),
        reason=reason, world_tempo=world, reference_S=reference_s, margin=margin, credit=credit, share=share,
        digest=digest, id=rid,
    )


def _create(path: Path) -> None:
    """Make a state file at ``path`` whole, schema and secret, then link it in place: no
    process ever sees it empty or without its secret. A file another process made in
    the meantime wins."""
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f".{path.name}.{os.getpid()}.new")
    conn = open_shared(draft, _SCHEMA)
    try:
        _new_secret(conn)
    finally:
        conn.close()  # the last connection folds the WAL into the file
    try:
        os.link(draft, path)
    except FileExistsError:
        pass
    finally:
        draft.unlink()


def _new_secret(conn: sqlite3.Connection) -> None:
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('instance_secret', ?)", (secrets.randbits(63),))


def _refusal(path: Path, what: str) -> str:
    return (f"the state file {path} {what}: its history cannot be replayed under a new secret. "
            f"Start with --reset to make a new instance secret in it, or give another --state")


def _write_weights(
    conn: sqlite3.Connection, block: int, weights: Mapping[int, float], payout: tuple[Payout, int | None] | None
) -> None:
    if payout is not None:
        conn.execute("INSERT OR REPLACE INTO payout (slot, block, kind, burn_uid) VALUES (0, ?, ?, ?)",
                     (block, str(payout[0]), payout[1]))
    conn.execute("DELETE FROM weights")
    conn.executemany("INSERT INTO weights (uid, weight) VALUES (?, ?)", sorted(weights.items()))
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('last_weights_block', ?)", (block,))


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces: the one JSON form hashes and comparisons use."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _dump(value: Any) -> str | None:
    return None if value is None else canonical_json(value)


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)
