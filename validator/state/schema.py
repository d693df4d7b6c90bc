"""The state file's schema: a numbered list of migrations, applied under SQLite's
``PRAGMA user_version``.

Migration ``n`` brings a file at version ``n - 1`` to ``n``, in one transaction that
also writes the new version, so a process killed mid-way leaves the file at one version
or the next. A file from before the numbering is at version 0: migrations 1–6 bring
any such file to the schema of that time, each checking first whether the file already
has what it adds (those files came in every shape the store ever wrote). From 7 on, a
migration is applied once, to a file at the version before it.

Adding a field to :class:`~validator.state.records.ExecutionRecord` is the field and one
migration appended here that adds its column (a default for the records before it).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, fields

from protocol.task import SYNTHETIC_PREFIX
from scoring.worlds import tallies

from .. import answers
from . import secret
from .records import ExecutionRecord
from .windows import encode_tallies

Migration = Callable[[sqlite3.Connection], None]

_TASKS_TABLE = """CREATE TABLE IF NOT EXISTS tasks (
    task_id TEXT PRIMARY KEY, state TEXT NOT NULL, since_block INTEGER, until_block INTEGER, reason TEXT,
    reference_failures INTEGER NOT NULL DEFAULT 0)"""

_TABLES_OF_VERSION_6 = (
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


def _tables(conn: sqlite3.Connection) -> None:
    """1: every table a file of version 6 has, where a table is missing."""
    for statement in _TABLES_OF_VERSION_6:
        conn.execute(statement)


def _drop_old_lifecycle(conn: sqlite3.Connection) -> None:
    """2: a file from before the reference rule kept verdicts drawn from miners' scores
    (deprecated, quarantined, removed): they go, every task starts active."""
    if "reference_failures" in columns(conn, "tasks"):
        return
    conn.execute("DROP TABLE tasks")
    conn.execute(_TASKS_TABLE)
    conn.execute("DELETE FROM meta WHERE key = 'last_closed_tempo'")


def _add_synthetic(conn: sqlite3.Connection) -> None:
    """3: records before the ``synthetic`` flag get it once, from the variant's id prefix
    (a base task id never starts with it); from then on the record's flag is the truth."""
    if "synthetic" in columns(conn, "executions"):
        return
    conn.execute("ALTER TABLE executions ADD COLUMN synthetic INTEGER NOT NULL DEFAULT 0")
    conn.execute(
        "UPDATE executions SET synthetic = 1 WHERE substr(task_id, 1, ?) = ?", (len(SYNTHETIC_PREFIX), SYNTHETIC_PREFIX)
    )


def _add_draw_columns(conn: sqlite3.Connection) -> None:
    """4: records before the hint tier and a drawn family's tempo were sent at ``full``,
    of a curated family, on the advertised profile."""
    _add_missing(
        conn,
        "executions",
        {"hint_tier": "TEXT NOT NULL DEFAULT 'full'", "drawn_tempo": "INTEGER", "world_tempo": "INTEGER"},
    )


def _add_capped_column(conn: sqlite3.Connection) -> None:
    """5: every value of a record from before the cap is whole."""
    _add_missing(conn, "executions", {"capped": "TEXT"})


def _add_margin_columns(conn: sqlite3.Connection) -> None:
    """6: records from before the margin over the reference have none, windows no margins."""
    _add_missing(
        conn,
        "executions",
        {"reference_s": "REAL", "margin": "REAL", "credit": "REAL", "share": "REAL", "digest": "TEXT"},
    )
    _add_missing(conn, "windows", {"margins": "TEXT NOT NULL DEFAULT '[]'", "shares": "TEXT NOT NULL DEFAULT '[]'"})


def _answers_tables(conn: sqlite3.Connection) -> None:
    """8: each miner's window of answers and when each hotkey was first seen sending each
    (:mod:`validator.answers`), which tell copies from the originals they copy."""
    for statement in answers.SCHEMA:
        conn.execute(statement)


def _add_draws_columns(conn: sqlite3.Connection) -> None:
    """9: records from before several draws of the world are of one draw."""
    _add_missing(conn, "executions", {"draws": "INTEGER NOT NULL DEFAULT 1", "drawn_s": "REAL"})


def _add_tallies_column(conn: sqlite3.Connection) -> None:
    """10: windows from before margins were tallied by world (:mod:`scoring.worlds`) hold
    each stored margin as a unit of its own, as they were counted then."""
    if "tallies" in columns(conn, "windows"):
        return
    conn.execute("ALTER TABLE windows ADD COLUMN tallies TEXT NOT NULL DEFAULT '[]'")
    for uid, margins in conn.execute("SELECT uid, margins FROM windows").fetchall():
        conn.execute(
            "UPDATE windows SET tallies = ? WHERE uid = ?", (encode_tallies(tallies(json.loads(margins))), uid)
        )


MIGRATIONS: tuple[Migration, ...] = (
    _tables,
    _drop_old_lifecycle,
    _add_synthetic,
    _add_draw_columns,
    _add_capped_column,
    _add_margin_columns,
    secret.migration,
    _answers_tables,
    _add_draws_columns,
    _add_tallies_column,
)
"""Migration ``n`` is ``MIGRATIONS[n - 1]``; append, never reorder."""


@dataclass(frozen=True, slots=True)
class Schema:
    """The migrations a state file is brought through, and the record class its
    executions hold (a field of it is a column, :mod:`validator.state.records`)."""

    migrations: tuple[Migration, ...] = MIGRATIONS
    record: type[ExecutionRecord] = ExecutionRecord

    @property
    def version(self) -> int:
        return len(self.migrations)


class SchemaMismatch(Exception):
    """A file this schema cannot use: from a newer dagnet, or not a state file."""


def migrate(
    conn: sqlite3.Connection, schema: Schema, transaction: Callable[[], AbstractContextManager[sqlite3.Connection]]
) -> None:
    """Bring the file to ``schema.version``, one migration per transaction (each checks
    the version again inside its transaction: another process may have migrated it)."""
    found = version(conn)
    if found > schema.version:
        raise SchemaMismatch(f"is of schema version {found}, newer than this dagnet's {schema.version}")
    for number in range(found + 1, schema.version + 1):
        with transaction() as txn:
            if version(txn) < number:
                schema.migrations[number - 1](txn)
                txn.execute(f"PRAGMA user_version = {number}")
    missing = {f.name.lower() for f in fields(schema.record)} - columns(conn, "executions")
    if missing:
        raise SchemaMismatch(
            f"is of schema version {schema.version} but its executions lack {', '.join(sorted(missing))}"
        )


def version(conn: sqlite3.Connection) -> int:
    return conn.execute("PRAGMA user_version").fetchone()[0]


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1].lower() for row in conn.execute(f"PRAGMA table_info({table})").fetchall()}


def _add_missing(conn: sqlite3.Connection, table: str, wanted: dict[str, str]) -> None:
    have = columns(conn, table)
    for column, kind in wanted.items():
        if column not in have:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
