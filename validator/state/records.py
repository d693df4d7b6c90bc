"""The executions room: what one miner's part in one step leaves in the state file.

A record is an :class:`ExecutionRecord`; its row is derived from the dataclass's fields
(:func:`row_of`, :func:`record_of`), so a new field is the field plus one migration that
adds its column (:mod:`validator.state.schema`). A field's ``metadata["stored"]`` says how
it is kept: ``"json"`` as canonical JSON, ``"capped"`` as canonical JSON up to the cap
(:class:`Capped` beyond), ``"flag"`` as 0/1; any other field as it is.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from protocol.hints import HintTier
from protocol.limits import KIB
from scoring.composite import Score, explain

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

_JSON = {"stored": "json"}
_CAPPED = {"stored": "capped"}
_FLAG = {"stored": "flag"}


@dataclass(frozen=True, slots=True)
class Records:
    """What records keep: each plan, final output and score up to ``answer_cap_bytes``
    whole, for ``retention_blocks`` blocks."""

    answer_cap_bytes: int = ANSWER_CAP_BYTES
    retention_blocks: int = RETENTION_BLOCKS


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
        return (
            f"the {what} was {self.size:,} bytes, over the record cap: kept as its sha256 "
            f"{self.sha256[:16]}… and its first {len(self.prefix.encode()):,} bytes"
        )


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
    plan: dict[str, Any] | Capped | None = field(metadata=_CAPPED)
    metrics: dict[str, Any] | None = field(metadata=_JSON)
    final_output: Any = field(metadata=_CAPPED)
    score: dict[str, Any] | Capped = field(metadata=_CAPPED)
    reason: str | None
    synthetic: bool = field(default=False, metadata=_FLAG)
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
    """The margin credited to the window: the margin, whole (copies are told from originals
    over the window at weight time, :func:`scoring.margin.leaders`)."""
    share: float | None = None
    """1.0 (before first-commit grouping: 1 ÷ the hotkeys that sent this answer on the step)."""
    digest: str | None = None
    """The plan's canonical digest (:func:`protocol.canonical.plan_digest`); ``None``: no valid plan."""
    draws: int = 1
    """How many draws of the world ``reference_S`` and the margin are means over
    (:mod:`validator.draws`); 1: the step's own run alone."""
    drawn_S: float | None = None
    """The plan's mean ``S`` over those draws (draw 0 is ``score``'s); ``None``: not drawn again
    (one draw, or its answer was not scored)."""
    id: int | None = None

    @property
    def paid_S(self) -> float:
        """The ``S`` the margin is taken on: the mean over the draws, else the score's."""
        assert not isinstance(self.score, Capped)  # a record being saved holds its score; Capped is read back
        return float(self.score["S"]) if self.drawn_S is None else self.drawn_S

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
    return _text_hash(canonical_json(plan))


def _text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces: the one JSON form hashes and comparisons use."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def insert(conn: sqlite3.Connection, block: int, records: Sequence[ExecutionRecord], cap: int) -> None:
    """Store ``records`` of the step at ``block``, each value a miner shapes kept up to ``cap`` bytes."""
    rows = [row_of(block, record, cap) for record in records]
    if rows:
        columns = list(rows[0])
        conn.executemany(
            f"INSERT INTO executions ({', '.join(columns)}) VALUES ({', '.join(':' + c for c in columns)})", rows
        )


def select(
    conn: sqlite3.Connection,
    kind: type[ExecutionRecord],
    *,
    record_id: int | None = None,
    block: int | None = None,
    uid: int | None = None,
    task_id: str | None = None,
    last: int | None = None,
) -> list[ExecutionRecord]:
    """The stored records of ``kind``, oldest first, filtered as :meth:`ValidatorState.executions` says."""
    filters = {"id = ?": record_id, "block = ?": block, "uid = ?": uid, "(task_id = ? OR base_task_id = ?)": task_id}
    chosen = {clause: value for clause, value in filters.items() if value is not None}
    where = " AND ".join(chosen)
    args = [value for clause, value in chosen.items() for _ in range(clause.count("?"))]
    names = [f.name for f in fields(kind)]
    query = f"SELECT {', '.join(names)}, capped FROM executions {'WHERE ' + where if where else ''} ORDER BY id DESC"
    if last is not None:
        query, args = query + " LIMIT ?", [*args, last]
    rows = conn.execute(query, args).fetchall()
    return [record_of(kind, dict(zip([*names, "capped"], row))) for row in reversed(rows)]


def prune(conn: sqlite3.Connection, before: int) -> int:
    """Delete records and step rows (at most :data:`PRUNE_BATCH` of each, oldest
    first) of blocks before ``before``; the newest step row stays, so a settled step is never
    settled again. Returns how many step rows went."""
    conn.execute(
        "DELETE FROM executions WHERE id IN (SELECT id FROM executions WHERE block < ? ORDER BY block LIMIT ?)",
        (before, PRUNE_BATCH),
    )
    return conn.execute(
        "DELETE FROM steps WHERE block IN (SELECT block FROM steps WHERE block < ? "
        "AND block < (SELECT MAX(block) FROM steps) ORDER BY block LIMIT ?)",
        (before, PRUNE_BATCH),
    ).rowcount


def row_of(block: int, record: ExecutionRecord, cap: int) -> dict[str, Any]:
    """The row of ``record``, one column per field (but ``id``) and the derived ones:
    ``plan_hash``, ``s`` and ``capped`` (which values were capped, their sha256 and size)."""
    assert not isinstance(record.score, Capped)  # a record being saved holds its score; Capped is read back
    # Each capped value's canonical JSON is made once: the plan's gives its hash and what is kept
    # of it (a plan can be megabytes, and a step settles a record a miner).
    texts = {f.name: _dump(getattr(record, f.name)) for f in fields(record) if f.metadata.get("stored") == "capped"}
    plan = texts["plan"]
    row: dict[str, Any] = {
        "block": block,
        "plan_hash": None if plan is None else _text_hash(plan),
        "s": float(record.score["S"]),
    }
    capped: dict[str, list[Any]] = {}
    for f in fields(record):
        value, stored = getattr(record, f.name), f.metadata.get("stored")
        if f.name in row or f.name == "id":
            continue
        if stored == "capped":
            value, mark = _kept(texts[f.name], cap)
            if mark is not None:
                capped[f.name] = [mark.sha256, mark.size]
        elif stored == "json":
            value = _dump(value)
        elif stored == "flag":
            value = int(value)
        row[f.name] = value
    row["capped"] = canonical_json(capped) if capped else None
    return row


def record_of(kind: type[ExecutionRecord], row: dict[str, Any]) -> ExecutionRecord:
    """The record a row (column → value, with ``capped``) holds."""
    marks = json.loads(row.pop("capped") or "{}")
    values: dict[str, Any] = {}
    for f in fields(kind):
        value, stored = row[f.name], f.metadata.get("stored")
        if f.name in marks:
            sha256, size = marks[f.name]
            value = Capped(sha256, size, value or "")
        elif stored in ("json", "capped"):
            value = _load(value)
        elif stored == "flag":
            value = bool(value)
        values[f.name] = value
    return kind(**values)


def _kept(text: str | None, cap: int) -> tuple[str | None, Capped | None]:
    """What a record stores of a value whose canonical JSON is ``text``: all of it when it
    fits in ``cap`` bytes, else its first bytes and the :class:`Capped` that says so."""
    if text is None:
        return None, None
    if len(text) * 4 <= cap:  # a code point is at most 4 bytes: no need to encode
        return text, None
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= cap:
        return text, None
    prefix = data[:CAPPED_PREFIX_BYTES].decode("utf-8", "ignore")
    return prefix, Capped(hashlib.sha256(data).hexdigest(), len(data), prefix)


def _dump(value: Any) -> str | None:
    return None if value is None else canonical_json(value)


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)


RECORD_BOUND_BYTES = 64 * KIB
"""What one record can add to the file: three capped values, the metrics, the reason
and the ids, with the B-tree's slack."""
STEP_BOUND_BYTES = 16 * KIB
"""What a step adds besides its records: its step row, the windows and tasks it touches."""


def step_growth_bound(miners: int) -> int:
    """The most the state file (with its ``-wal``, past the WAL's own ``WAL_LIMIT_BYTES``)
    grows by for a step that scored ``miners`` miners."""
    return miners * RECORD_BOUND_BYTES + STEP_BOUND_BYTES
