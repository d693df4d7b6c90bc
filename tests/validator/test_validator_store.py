"""The state file's schema (numbered migrations under ``PRAGMA user_version``), its
record rows derived from the dataclass, and the instance secret (validator/state/).

``fixtures/state_main_6197a53.sqlite`` was written by the state code of main at
6197a53, before the numbering (user_version 0, a 63-bit secret in ``meta``): three
records (one plan capped at a 2 KiB cap, one with a margin, one of a drawn family), two
steps, weights with their payout, a task with a failed reference run.
"""

import contextlib
import dataclasses
import shutil
import sqlite3
from pathlib import Path

import pytest

from scoring.margin import Payout
from scoring.worlds import Tally
from subnets.world import world_for
from validator.sampling import instance_seed
from validator.state import (
    MIGRATIONS,
    Capped,
    ExecutionRecord,
    PaidOut,
    Records,
    Schema,
    StateRefused,
    ValidatorState,
)
from validator.state.secret import SECRET_BYTES, draw_key

FIXTURE = Path(__file__).parents[1] / "fixtures" / "state_main_6197a53.sqlite"
LEGACY_SECRET = 8050554739146579377
"""The fixture's 63-bit secret."""


@pytest.fixture
def old_file(tmp_path: Path) -> Path:
    path = tmp_path / "validator.sqlite"
    shutil.copyfile(FIXTURE, path)
    return path


def _sql(path: Path, *statements: str) -> list[tuple]:
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        return [row for statement in statements for row in conn.execute(statement).fetchall()]


def test_a_state_file_of_main_before_the_numbering_migrates_and_keeps_everything(old_file: Path) -> None:
    assert _sql(old_file, "PRAGMA user_version") == [(0,)]
    state = ValidatorState(old_file)
    try:
        records = state.executions()
        assert [(r.block, r.uid, r.task_id) for r in records] == [
            (100, 1, "data_join"),
            (100, 2, "syn_data_join"),
            (110, 1, "gen_0123456789ab"),
        ]
        first, capped, drawn = records
        assert first.plan == {"nodes": [{"id": "a", "tool": "echo", "args": {"text": "hi"}}], "edges": []}
        assert first.metrics == {"latency_s": 1.5} and first.final_output == {"answer": 3} and first.reference_S is None
        assert isinstance(capped.plan, Capped) and capped.plan.size > 2048 and capped.synthetic
        assert (capped.hint_tier, capped.world_tempo, capped.margin, capped.credit) == ("outline", 1, -0.4, -0.4)
        assert (drawn.drawn_tempo, drawn.share, drawn.digest) == (11, 0.5, "e" * 64)
        assert {(r.draws, r.drawn_S) for r in records} == {(1, None)}  # margins from before draws: one run
        assert state.execution(first.id) == first
        assert state.last_weights() == {1: 0.75, 2: 0.25} and state.last_weights_block() == 120
        assert state.last_payout() == PaidOut(120, Payout("margin"))
        assert state.task_lifecycles()["rag_lookup"].reference_failures == 1
        standing = state.standing()
        assert standing.tasks_seen == {1: 2, 2: 1}
        # Margins from before they were tallied by world: each a unit of its own, as counted then.
        assert standing.tallies == {1: [Tally(None, 1, 0.0)], 2: [Tally(None, 1, -0.4)]}
        assert state.steps_settled() == 2
    finally:
        state.close()
    assert _sql(old_file, "PRAGMA user_version") == [(len(MIGRATIONS),)]


def test_a_migrated_file_keeps_its_63_bit_secret_until_the_next_tempo_starts(old_file: Path) -> None:
    state = ValidatorState(old_file)
    try:
        assert state.instance_secret() == LEGACY_SECRET  # a new secret waits: nothing is scheduled yet
        assert state.step_secret(125, tempo=10) == LEGACY_SECRET  # the first step: tempo 12 plays on
        assert state.instance_secret(129) == LEGACY_SECRET and state.instance_secret(100) == LEGACY_SECRET
        new = state.instance_secret(130)
        assert new != LEGACY_SECRET and new.bit_length() > 128 and state.instance_secret() == new
        assert state.step_secret(140, tempo=10) == new  # once scheduled, it stays
        assert state.instance_secret(135) == new
    finally:
        state.close()
    (stored,) = _sql(old_file, "SELECT hex, since_block FROM secret")
    assert len(stored[0]) == 2 * SECRET_BYTES and stored[1] == 130
    again = ValidatorState(old_file)
    assert (again.instance_secret(129), again.instance_secret(130)) == (LEGACY_SECRET, new)
    again.close()


@dataclasses.dataclass(frozen=True, slots=True)
class _Tagged(ExecutionRecord):
    label: str | None = None
    notes: dict | None = dataclasses.field(default=None, metadata={"stored": "json"})


def _add_tags(conn: sqlite3.Connection) -> None:
    conn.execute("ALTER TABLE executions ADD COLUMN label TEXT")
    conn.execute("ALTER TABLE executions ADD COLUMN notes TEXT")


_TAGGED = Schema((*MIGRATIONS, _add_tags), _Tagged)


def test_a_field_added_to_the_record_is_the_field_and_one_migration(old_file: Path) -> None:
    state = ValidatorState(old_file, schema=_TAGGED)
    try:
        assert all(isinstance(r, _Tagged) and r.label is None for r in state.executions())
        base = state.executions()[0]
        fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(ExecutionRecord) if f.name != "id"}
        state.settle_step(200, [_Tagged(**{**fields, "block": 200}, label="x", notes={"k": [1]})])
    finally:
        state.close()
    again = ValidatorState(old_file, schema=_TAGGED)
    (tagged,) = again.executions(block=200)
    assert (tagged.label, tagged.notes, tagged.plan) == ("x", {"k": [1]}, base.plan)
    again.close()
    with pytest.raises(StateRefused, match=f"schema version {len(MIGRATIONS) + 1}, newer than"):
        ValidatorState(old_file)  # the dagnet without the migration refuses the file it cannot read whole


def test_each_migration_runs_once_in_the_order_of_its_number(tmp_path: Path) -> None:
    ran: list[int] = []
    schema = Schema(MIGRATIONS + (lambda conn: ran.append(8), lambda conn: ran.append(9)))
    path = tmp_path / "v.sqlite"
    ValidatorState(path).close()
    assert _sql(path, "PRAGMA user_version") == [(len(MIGRATIONS),)]
    for _ in range(2):
        ValidatorState(path, schema=schema).close()
    assert ran == [8, 9] and _sql(path, "PRAGMA user_version") == [(len(MIGRATIONS) + 2,)]


def test_a_new_secret_is_128_random_bits_and_nothing_published_is_a_fast_hash_of_it(tmp_path: Path) -> None:
    made = []
    for name in ("a", "b"):
        state = ValidatorState(tmp_path / name / "v.sqlite")
        made.append((state.instance_secret(), _sql(state.path, "SELECT hex FROM secret")[0][0]))
        state.close()
    (key, secret), (other, _) = made
    assert len(secret) == 2 * SECRET_BYTES and int(secret, 16) >= 2**96 and key != other
    assert key == draw_key(secret) and key.bit_length() > 200  # the draws start from scrypt of it
    salt = world_for(key, 7, {}).salt
    for raw in (secret, int(secret, 16)):
        assert salt != world_for(raw, 7, {}).salt
    again = ValidatorState(tmp_path / "a" / "v.sqlite")  # the same secret draws the same instances
    assert instance_seed(again.instance_secret(5), 5, "t") == instance_seed(key, 5, "t")
    again.close()


@pytest.mark.parametrize(
    ("statement", "value"),
    [
        ("UPDATE meta SET value = ? WHERE key = 'instance_secret'", ""),
        ("UPDATE meta SET value = ? WHERE key = 'instance_secret'", 0),
        ("UPDATE meta SET value = ? WHERE key = 'instance_secret'", "abc"),
        ("UPDATE meta SET value = ? WHERE key = 'instance_secret'", 2**31),
        ("UPDATE secret SET hex = ?", ""),
        ("UPDATE secret SET hex = ?", "0"),
        ("UPDATE secret SET hex = ?", "abc"),
        ("UPDATE secret SET hex = ?", "00" * SECRET_BYTES),
        ("UPDATE secret SET hex = ?", "zz" * SECRET_BYTES),
    ],
)
def test_a_weak_secret_is_refused_naming_reset(old_file: Path, statement: str, value: object) -> None:
    ValidatorState(old_file).close()
    with contextlib.closing(sqlite3.connect(old_file)) as conn, conn:
        conn.execute(statement, (value,))
    with pytest.raises(StateRefused, match=r"has a weak instance secret .*--reset") as refused:
        ValidatorState(old_file)
    assert "\n" not in str(refused.value)
    state = ValidatorState(old_file, reset=True)
    assert len(state.executions()) == 3 and state.instance_secret(0) == state.instance_secret()
    state.close()
    assert _sql(old_file, "SELECT value FROM meta WHERE key = 'instance_secret'") == []


@pytest.mark.parametrize("content", [b"", b"not a database" * 300])
def test_an_unreadable_state_file_is_refused_in_one_line(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "v.sqlite"
    path.write_bytes(b"SQLite format 3\x00" + content if content else b"garbage" * 1000)
    with pytest.raises(StateRefused, match="cannot be opened: file is not a database") as refused:
        ValidatorState(path)
    assert "\n" not in str(refused.value)


def test_a_record_row_is_derived_from_the_dataclass(tmp_path: Path) -> None:
    state = ValidatorState(tmp_path / "v.sqlite", records=Records(answer_cap_bytes=64))
    record = ExecutionRecord(
        block=3,
        uid=1,
        hotkey="hk",
        task_id="t",
        base_task_id="t",
        instance_seed=9,
        plan={"nodes": ["x" * 100]},
        metrics={"m": 1},
        final_output="out",
        score={"S": 0.25},
        reason=None,
        synthetic=True,
        hint_tier="none",
        drawn_tempo=4,
        world_tempo=4,
        reference_S=0.5,
        margin=-0.25,
        credit=-0.25,
        share=1.0,
        digest="d",
        draws=4,
        drawn_S=0.25,
    )
    try:
        state.settle_step(3, [record])
        (stored,) = state.executions()
    finally:
        state.close()
    assert isinstance(stored.plan, Capped) and stored.plan.sha256 == record.plan_hash
    assert dataclasses.replace(stored, plan=record.plan, id=None) == record
    assert _sql(tmp_path / "v.sqlite", "SELECT s, plan_hash FROM executions") == [(0.25, record.plan_hash)]
