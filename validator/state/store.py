"""The facade: :class:`ValidatorState`, one SQLite connection and its transactions;
each room (records, windows, lifecycle, payout, secret) does its part on it."""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from protocol.limits import MIB
from scoring.margin import Entry, Payout, outcome_key
from scoring.window import RollingWindow
from storage import open_shared

from .. import answers
from ..failures import InfrastructureFailure
from . import lifecycle, payout, records, secret, windows
from .lifecycle import Lifecycle, ReferenceRun, TaskLifecycle
from .payout import PaidOut
from .records import ExecutionRecord, Records
from .schema import Schema, SchemaMismatch, migrate
from .windows import WINDOW_SIZE, Standing

log = logging.getLogger(__name__)

WAL_LIMIT_BYTES = 8 * MIB
"""The ``-wal`` file is truncated back to this size after each checkpoint
(``PRAGMA journal_size_limit``); between two, it holds at most the 4 MiB SQLite
checkpoints at plus one step's writes."""

_UNWRITABLE = {sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY}
"""Primary SQLite result codes that mean the disk refused a write."""


class StateRefused(ValueError):
    """A state file the validator will not start on: empty, without its instance secret
    or with a weak one (each fixed by ``--reset``), unreadable, or of another schema."""


class StateUnwritable(InfrastructureFailure):
    """The disk refused a write to the state file (full, an I/O error, read-only): the
    write changed nothing."""

    def __init__(self, path: Path, error: sqlite3.Error) -> None:
        super().__init__("state", f"the state file {path} cannot be written: {error}")
        self.error = error


class ValidatorState:
    """The validator's SQLite state. One instance per process; not thread-safe."""

    def __init__(
        self,
        path: Path,
        *,
        window_size: int = WINDOW_SIZE,
        lifecycle: Lifecycle = Lifecycle(),
        records: Records = Records(),
        reset: bool = False,
        schema: Schema = Schema(),
    ) -> None:
        """Open the state at ``path``, made whole with a new secret when nothing is there,
        and migrate it to ``schema``. Raises :class:`StateRefused` for a file that is
        empty, has lost its secret or has a weak one (unless ``reset``: then a new secret
        is made in it), cannot be read, or is of a newer schema."""
        self.path = Path(path)
        self.lifecycle = lifecycle
        self.records = records
        self.schema = schema
        self._window_size = window_size
        self.write_problem: str | None = None
        """Why the last write failed, while it is the last write; ``None`` once one succeeds."""
        self._unrecorded_weights: payout.Accepted | None = None
        self.created = not self.path.exists()
        """Whether this instance made the file."""
        try:
            self._open(reset)
        except SchemaMismatch as exc:
            raise StateRefused(f"the state file {self.path} {exc}: give another --state") from None
        except (sqlite3.DatabaseError, StateUnwritable) as exc:
            raise StateRefused(f"the state file {self.path} cannot be opened: {exc}") from None

    def _open(self, reset: bool) -> None:
        if not self.path.exists():
            _create(self.path, self.schema)
        elif self.path.stat().st_size == 0 and not reset:
            raise StateRefused(_refusal(self.path, "is empty (0 bytes)"))
        self._conn = open_shared(self.path)
        try:
            self._conn.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT_BYTES}")
            migrate(self._conn, self.schema, self._transaction)
            self._secrets = self._keep_secret(reset)
        except BaseException:
            self._conn.close()
            raise

    def close(self, *, discard_unused: bool = False) -> None:
        """Close the file; with ``discard_unused``, a file this instance made that holds no
        settled step and no weights goes too (with its ``-wal`` and ``-shm``): a validator
        that never stepped leaves none behind."""
        unused = discard_unused and self.created and self.steps_settled() == 0 and self.last_weights_block() is None
        self._conn.close()
        if unused:
            for suffix in ("", "-wal", "-shm"):
                self.path.with_name(self.path.name + suffix).unlink(missing_ok=True)

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
                    payout.write(self._conn, self._unrecorded_weights)
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
        return windows.window(self._conn, self._window_size)

    def standing(self) -> Standing:
        """Every uid's window, tasks seen and hotkey, as of one moment (:func:`windows.standing`)."""
        return windows.standing(self._conn, self._window_size)

    def answer_windows(self) -> tuple[dict[int, tuple[str, list[Entry]]], dict[int, int]]:
        """Each uid's hotkey and window of answers, and its claim to them (the block it
        was first seen sending an answer another uid also sent): :mod:`validator.answers`."""
        # Two reads, no transaction of their own (the connection is shared): a step settling
        # between them only adds first-seen rows at a later block, which lower no claim.
        kept = answers.windows(self._conn)
        return kept, answers.claims(self._conn, kept)

    def tasks_seen(self) -> dict[int, int]:
        return dict(self._conn.execute("SELECT uid, tasks_seen FROM windows ORDER BY uid").fetchall())

    def hotkeys(self) -> dict[int, str]:
        return dict(self._conn.execute("SELECT uid, hotkey FROM windows ORDER BY uid").fetchall())

    # -- steps and records ----------------------------------------------------------

    def settle_step(
        self,
        block: int,
        settled: Sequence[ExecutionRecord],
        reference: ReferenceRun | None = None,
        *,
        tempo: int | None = None,
    ) -> bool:
        """Store a step's records, add their scores to the windows and apply its
        reference run to the task's lifecycle (:func:`lifecycle.judge`), atomically.

        Returns ``False`` (and changes nothing) when the step at ``block`` is
        already settled, so a step replayed after a restart never counts twice.
        ``tempo`` (blocks) sizes the cool-off of a task this step sets aside.
        """
        with self._transaction() as conn:
            if conn.execute("SELECT 1 FROM steps WHERE block = ?", (block,)).fetchone():
                return False
            if reference is not None:
                lifecycle.judge(conn, block, reference, tempo, self.lifecycle)
            task_ids = ",".join(sorted({r.base_task_id for r in settled}))
            conn.execute("INSERT INTO steps (block, task_id, miners) VALUES (?, ?, ?)", (block, task_ids, len(settled)))
            records.insert(conn, block, settled, self.records.answer_cap_bytes)
            for record in settled:
                windows.add_score(conn, record, self._window_size)
            answers.record(conn, block, map(_answered, settled), self._window_size)
            answers.forget_before(conn, block - self.records.retention_blocks)  # answers last seen before it
            pruned = records.prune(conn, block - self.records.retention_blocks)
            if pruned:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('steps_pruned', ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = value + excluded.value",
                    (pruned,),
                )
        return True

    def last_step_block(self) -> int | None:
        return self._conn.execute("SELECT MAX(block) FROM steps").fetchone()[0]

    def settled_between(self, first: int, end: int) -> bool:
        """Whether a step of a block in ``[first, end)`` is kept."""
        return (
            self._conn.execute("SELECT 1 FROM steps WHERE block >= ? AND block < ? LIMIT 1", (first, end)).fetchone()
            is not None
        )

    def steps_settled(self) -> int:
        """Every step ever settled in this file, those retention deleted included."""
        return self._conn.execute("SELECT COUNT(*) FROM steps").fetchone()[0] + (self._get_meta("steps_pruned") or 0)

    def execution(self, record_id: int) -> ExecutionRecord | None:
        found = records.select(self._conn, self.schema.record, record_id=record_id)
        return found[0] if found else None

    def executions(
        self, *, block: int | None = None, uid: int | None = None, task_id: str | None = None, last: int | None = None
    ) -> list[ExecutionRecord]:
        """The stored records, oldest first: of one step (``block``), one miner (``uid``),
        one task (``task_id``, as sent or its base task), the ``last`` ones of those."""
        return records.select(self._conn, self.schema.record, block=block, uid=uid, task_id=task_id, last=last)

    # -- weights --------------------------------------------------------------------

    def last_weights_block(self) -> int | None:
        if self._unrecorded_weights is not None:
            return self._unrecorded_weights[0]
        return self._get_meta("last_weights_block")

    def weights_accepted(
        self, block: int, weights: Mapping[int, float], paid: Payout | None = None, *, burn_uid: int | None = None
    ) -> None:
        """Record weights the chain accepted at ``block`` (replacing the previous set).

        Never raises for the disk: weights are set on chain by then, and a validator
        that stopped here would set them again, unrecorded, at its restart. When the
        disk refuses, they are kept in memory (what :meth:`last_weights_block` and
        :meth:`last_weights` return) and written with the next write that succeeds."""
        self._unrecorded_weights = payout.accepted(block, weights, paid, burn_uid)
        try:
            with self._transaction():
                pass  # the weights kept in memory go in first
        except StateUnwritable as exc:
            log.error(
                "weights accepted at block %s are kept in memory until the state can be written: %s", block, exc.error
            )

    def last_payout(self) -> PaidOut | None:
        """Where the weights last accepted on chain sent the emission; ``None`` before any
        (or when they were recorded without it)."""
        if self._unrecorded_weights is not None:
            block, _, paid = self._unrecorded_weights
            return None if paid is None else PaidOut(block, *paid)
        return payout.last_payout(self._conn)

    def last_weights(self) -> dict[int, float]:
        """The weights last accepted on chain, by uid."""
        if self._unrecorded_weights is not None:
            return dict(sorted(self._unrecorded_weights[1].items()))
        return payout.last_weights(self._conn)

    # -- the instance secret ----------------------------------------------------------

    def instance_secret(self, block: int | None = None) -> int:
        """What this validator's draws at ``block`` start from (:mod:`validator.state.secret`;
        ``None``: the newest secret in effect): random, made with the file, kept."""
        return self._secrets.at(block)

    def step_secret(self, block: int, tempo: int | None) -> int:
        """What the step at ``block`` draws from; a secret waiting since a migration is first
        put in effect at the start of the tempo after ``block``'s (``tempo`` blocks long;
        at ``block`` when the loop reads no tempo, :func:`secret.schedule`)."""
        if self._secrets.since_block is None:
            with self._transaction() as conn:
                since = secret.schedule(conn, block, tempo)
            self._secrets = self._read_secrets()  # another process may have scheduled it first
            if since is not None:
                log.warning("state file %s: the 128-bit instance secret takes effect at block %s", self.path, since)
        return self._secrets.at(block)

    def _keep_secret(self, reset: bool) -> secret.Secrets:
        """The file's secrets; one lost or weak is refused unless ``reset``: then a new one is made."""
        found = secret.read(self._conn)
        if isinstance(found, secret.Secrets):
            return found
        if not reset:
            raise StateRefused(_refusal(self.path, found))
        with self._transaction() as conn:
            secret.make(conn)
        log.warning("state file %s: a new instance secret was made (--reset)", self.path)
        return self._read_secrets()

    def _read_secrets(self) -> secret.Secrets:
        found = secret.read(self._conn)
        assert isinstance(found, secret.Secrets), found
        return found

    # -- task lifecycle -------------------------------------------------------------

    def task_states(self, task_ids: Sequence[str] = ()) -> dict[str, str]:
        """Each task's state; tasks never seen before are registered as active."""
        return {task_id: task.state for task_id, task in self.task_lifecycles(task_ids).items()}

    def task_lifecycles(self, task_ids: Sequence[str] = ()) -> dict[str, TaskLifecycle]:
        """Every stored task's lifecycle, by id; ``task_ids`` never seen before are registered as active."""
        if task_ids:
            with self._transaction() as conn:
                lifecycle.register(conn, task_ids)
        return lifecycle.lifecycles(self._conn)

    def reinstate(self, block: int) -> list[str]:
        """Make every set-aside task whose cool-off has ended by ``block`` active again;
        returns their ids. Depends on the block alone, so calling it twice is harmless."""
        due = lifecycle.due(self._conn, block)
        if due:
            with self._transaction() as conn:
                lifecycle.reinstate(conn, due)
        return due

    def reset_tasks(self) -> int:
        """Every task active again with no failures counted; returns how many tasks are stored."""
        with self._transaction() as conn:
            return lifecycle.reset(conn)

    def _get_meta(self, key: str) -> int | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]


def _create(path: Path, schema: Schema) -> None:
    """Make a state file at ``path`` whole, schema and secret, then link it in place: no
    process ever sees it empty or without its secret. A file another process made in
    the meantime wins."""
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f".{path.name}.{os.getpid()}.new")
    conn = open_shared(draft)
    try:
        migrate(conn, schema, lambda: _plain_transaction(conn))
        with _plain_transaction(conn):
            secret.make(conn)
    finally:
        conn.close()  # the last connection folds the WAL into the file
    try:
        os.link(draft, path)
    except FileExistsError:
        pass
    finally:
        draft.unlink()


@contextlib.contextmanager
def _plain_transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _refusal(path: Path, what: str) -> str:
    return (
        f"the state file {path} {what}: its history cannot be replayed under a new secret. "
        f"Start with --reset to make a new instance secret in it, or give another --state"
    )


def _answered(record: ExecutionRecord) -> answers.Answered:
    """What :mod:`validator.answers` keeps of a record: S (over the step's draws), margin,
    digest and outcome key (of what the step's own run did)."""
    assert not isinstance(record.score, records.Capped)  # a record being saved holds its score; Capped is read back
    ran = record.metrics is not None
    return answers.Answered(
        record.uid,
        record.hotkey,
        record.paid_S,
        record.margin,
        record.digest,
        outcome_key(float(record.score["S"]), record.final_output) if ran else None,
    )
