"""The validator's state on disk: growth per step bounded whatever miners send, records
capped and pruned, a full disk survived, a state file that lost its secret refused."""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from neurons import validator as process
from neurons.cli import app
from neurons.localrun import SHIPPED_TASKS, load_task_source
from protocol.limits import KIB, OUTPUT_CODE_MAX_BYTES, OUTPUT_METADATA_MAX_BYTES, OUTPUT_TEXT_MAX_BYTES
from protocol.outcomes import StepOutcome
from scoring.evaluate import saved_metrics, score_run
from support.health import validator_loop
from support.keys import MetagraphBuilder, dev_keypair
from support.tasks import SomeFamilies
from support.tmpfs import fill, needs_root, tmpfs
from validator.audit import recorded_task, replay
from validator.state import (
    ANSWER_CAP_BYTES,
    PRUNE_BATCH,
    WAL_LIMIT_BYTES,
    Capped,
    ExecutionRecord,
    Records,
    StateRefused,
    StateUnwritable,
    ValidatorState,
    canonical_json,
    plan_hash,
    step_growth_bound,
)

SYBILS = 8
METRICS = {
    "status": "success",
    "completion_ratio": 1.0,
    "latency_s": 0.5,
    "cost_tao": 0.01,
    "retries": 0,
    "unplanned_retries": 0,
    "timeouts": 0,
    "hard_failures": 0,
    "budget_ceiling": 0.1,
    "clock": "simulated",
}


def _largest_plan() -> dict:
    """A plan as large as a 1 MiB reply carries: 256 nodes of 4 KiB params each."""
    return {
        "nodes": [
            {"id": f"n{i}", "subnet": "sn1", "action": "echo", "params": {"text": "p" * 4000}} for i in range(256)
        ]
    }


def _largest_output() -> dict:
    """A final output at every size limit of the node output, in characters JSON escapes sixfold."""
    return {
        "text": "\x01" * OUTPUT_TEXT_MAX_BYTES,
        "artifacts": {
            "code": "\x01" * OUTPUT_CODE_MAX_BYTES,
            "metadata": {"m": "m" * (OUTPUT_METADATA_MAX_BYTES - 16)},
        },
    }


def _largest_score(s: float) -> dict:
    """A score whose evidence repeats the output (schema errors quote the value they reject)."""
    return {"S": s, "details": {"quality": {"schema_errors": ["\x01" * OUTPUT_TEXT_MAX_BYTES] * 5}}}


def _sybil_record(block: int, uid: int) -> ExecutionRecord:
    return ExecutionRecord(
        block=block,
        uid=uid,
        hotkey=f"sybil{uid}",
        task_id="dt_sales",
        base_task_id="dt_sales",
        instance_seed=block,
        plan=_largest_plan(),
        metrics=METRICS,
        final_output=_largest_output(),
        score=_largest_score(0.5),
        reason=None,
    )


def _at_the_cap(block: int, uid: int) -> ExecutionRecord:
    """An answer each of whose kept values is as large as a record keeps whole."""

    def filled(**value) -> dict:
        return {**value, "x": "a" * (ANSWER_CAP_BYTES - len(canonical_json({**value, "x": ""})))}

    record = _sybil_record(block, uid)
    return dataclasses.replace(record, plan=filled(), final_output=filled(), score=filled(S=0.5))


def _file_bytes(path: Path) -> int:
    """The state file as the disk holds it: the database and its write-ahead log."""
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


# -- growth per step, capped records, retention -------------------------------------------


@pytest.mark.parametrize("answer", [_sybil_record, _at_the_cap], ids=["largest", "at-the-cap"])
def test_the_file_grows_by_at_most_its_bound_per_step_whatever_miners_send(tmp_path: Path, answer) -> None:
    path = tmp_path / "v.sqlite"
    state = ValidatorState(path)
    before, steps = _file_bytes(path), 12
    for block in range(1, steps + 1):
        state.settle_step(block, [answer(block, uid) for uid in range(SYBILS)])
        grown = _file_bytes(path) - before
        # the WAL holds up to its limit plus one step between checkpoints
        assert grown <= block * step_growth_bound(SYBILS) + WAL_LIMIT_BYTES + step_growth_bound(SYBILS), (block, grown)
    state.close()
    assert len(ValidatorState(path).executions()) == steps * SYBILS


def test_a_record_keeps_a_large_value_as_its_hash_size_and_prefix(tmp_path: Path) -> None:
    state = ValidatorState(tmp_path / "v.sqlite")
    sent = _sybil_record(1, 3)
    state.settle_step(
        1, [sent, dataclasses.replace(sent, uid=4, plan={"nodes": []}, final_output={"text": "ok"}, score={"S": 0.5})]
    )
    big, small = state.executions()
    for stored, value in ((big.plan, sent.plan), (big.final_output, sent.final_output), (big.score, sent.score)):
        text = canonical_json(value).encode()
        assert isinstance(stored, Capped) and stored.size == len(text) > ANSWER_CAP_BYTES
        assert text.startswith(stored.prefix.encode()) and 0 < len(stored.prefix.encode()) <= 1 * KIB
    assert big.plan_hash == plan_hash(sent.plan)  # the hash of a capped plan is the plan's
    assert small.plan == {"nodes": []} and small.final_output == {"text": "ok"} and small.score == {"S": 0.5}
    assert state.window().means() == {3: 0.5, 4: 0.5}  # windows count the score as sent
    state.close()


def test_records_past_the_retention_window_are_pruned_and_their_pages_reused(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    retention = Records(retention_blocks=5)
    # Windows of 5 steps (scores, margins and answers per uid) are full long before block 12,
    # so from there on only records come and go.
    state = ValidatorState(path, records=retention, window_size=5)
    sizes = {}
    for block in range(1, 31):
        state.settle_step(block, [_sybil_record(block, uid) for uid in range(SYBILS)])
        if block in (12, 30):  # the last connection to close folds the WAL into the database
            state.close()
            sizes[block] = _file_bytes(path)
            state = ValidatorState(path, records=retention, window_size=5)
    assert sorted({r.block for r in state.executions()}) == list(range(25, 31))
    assert state.steps_settled() == 30 and state.last_step_block() == 30
    assert not state.settle_step(30, [])  # the newest step row stays: a settled step never settles twice
    # once the window is full the file stops growing: freed pages hold the new records
    assert sizes[30] <= sizes[12], sizes
    state.close()


def test_the_local_network_table_reads_the_scores_kept_whole(tmp_path: Path) -> None:
    from neurons.localnet import _SCORE_PARTS, _mean_parts

    state = ValidatorState(tmp_path / "v.sqlite")
    whole = dict.fromkeys(_SCORE_PARTS, 0.5)
    state.settle_step(1, [_sybil_record(1, 1), dataclasses.replace(_sybil_record(1, 2), score=whole)])
    assert _mean_parts(state) == {2: whole}  # uid 1's score is capped: its parts are not kept
    state.close()


def test_a_backlog_of_old_records_drains_a_batch_per_step(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    state = ValidatorState(path, records=Records(retention_blocks=10**9))  # a file from before retention
    for block in range(1, 4):
        state.settle_step(block, [_small(block, uid) for uid in range(PRUNE_BATCH)])
    state.close()
    state = ValidatorState(path, records=Records(retention_blocks=5))
    remaining = []
    for block in range(100, 104):
        state.settle_step(block, [_small(block, 0)])
        remaining.append(len(state.executions()))
    assert remaining == [2 * PRUNE_BATCH + 1, PRUNE_BATCH + 2, 3, 4]
    state.close()


# -- replay of capped records -----------------------------------------------------------


def _replayable(tmp_path: Path, final_output: dict, *, cap: int = ANSWER_CAP_BYTES) -> tuple[ValidatorState, object]:
    """A state holding one real record of dt_inventory: ``final_output`` scored as the step would."""
    source = load_task_source(SHIPPED_TASKS)
    sent = ExecutionRecord(
        block=5,
        uid=1,
        hotkey="hk1",
        task_id="dt_inventory",
        base_task_id="dt_inventory",
        instance_seed=11,
        plan={"nodes": []},
        metrics=METRICS,
        final_output=final_output,
        score={},
        reason=None,
    )
    task = recorded_task(sent, source)
    score = score_run(task, metrics=saved_metrics(METRICS), final_output=final_output).model_dump(mode="json")
    state = ValidatorState(tmp_path / "v.sqlite", records=Records(answer_cap_bytes=cap))
    state.settle_step(5, [dataclasses.replace(sent, task_id=task.task_id, score=score)])
    return state, source


def test_a_capped_final_output_replays_what_it_can_and_says_what_it_cannot(tmp_path: Path) -> None:
    state, source = _replayable(tmp_path, _largest_output())
    (record,) = state.executions()
    assert isinstance(record.final_output, Capped) and not isinstance(record.score, Capped)
    result = replay(record, source)
    assert result.identical is True
    assert "final output was" in result.unchecked and "its quality was not scored again" in result.unchecked
    forged = dataclasses.replace(record, score={**record.score, "S_latency": 1.0})
    assert replay(forged, source).identical is False  # the rest of the score is still checked

    cli = CliRunner().invoke(app, ["validator", "--state", str(state.path), "--replay", str(record.id)])
    assert cli.exit_code == 0, cli.output
    assert f"note: record {record.id} is capped: the final output was" in cli.stderr
    state.close()


def test_a_capped_score_is_checked_by_its_hash_and_nothing_capped_twice_is_claimed(tmp_path: Path) -> None:
    state, source = _replayable(tmp_path, {"text": "[]"}, cap=256)  # the output fits, the score does not
    (record,) = state.executions()
    assert isinstance(record.score, Capped) and record.final_output == {"text": "[]"}
    result = replay(record, source)
    assert result.identical is True and result.unchecked is None
    assert (
        replay(dataclasses.replace(record, score=dataclasses.replace(record.score, sha256="0" * 64)), source).identical
        is False
    )
    state.close()

    state, source = _replayable(tmp_path / "both", _largest_output(), cap=256)
    (record,) = state.executions()
    result = replay(record, source)
    assert result.identical is None and "only the task's rebuild from its draw was checked" in result.unchecked
    cli = CliRunner().invoke(app, ["validator", "--state", str(state.path), "--replay", str(record.id)])
    assert cli.exit_code == 3, cli.output
    state.close()


# -- a full disk ------------------------------------------------------------------------


def _small(block: int, uid: int, s: float = 0.5, hotkey: str | None = None) -> ExecutionRecord:
    return ExecutionRecord(
        block=block,
        uid=uid,
        hotkey=hotkey or f"hk{uid}",
        task_id="t",
        base_task_id="t",
        instance_seed=block,
        plan={"nodes": []},
        metrics=METRICS,
        final_output={"text": "x"},
        score={"S": s},
        reason=None,
    )


def _fill(state: ValidatorState, pages: int | None = None) -> None:
    """SQLite's own full disk: the database may not grow past ``pages`` (default: its size now)."""
    pages = pages or state._conn.execute("PRAGMA page_count").fetchone()[0]
    state._conn.execute(f"PRAGMA max_page_count = {pages}")


def test_a_write_that_changes_nothing_does_not_clear_the_disk_problem(tmp_path: Path) -> None:
    """Each step starts by registering the tasks it may send (INSERT OR IGNORE: usually
    nothing new, a transaction that commits on a full disk too). /health must keep naming
    the disk until a write that stores something succeeds."""
    state = ValidatorState(tmp_path / "v.sqlite")
    state.settle_step(1, [_small(1, 1, 1.0)])
    state.task_states(["dt_sales"])
    _fill(state)
    with pytest.raises(StateUnwritable):
        state.settle_step(2, [_sybil_record(2, 1), _sybil_record(2, 2)])
    assert state.task_states(["dt_sales"]) == {"dt_sales": "active"}
    assert state.write_problem is not None and "database or disk is full" in state.write_problem
    state.close()


def test_a_step_the_disk_refuses_leaves_nothing_and_the_next_one_settles(tmp_path: Path) -> None:
    state = ValidatorState(tmp_path / "v.sqlite")
    state.settle_step(1, [_small(1, 1, 1.0)])
    _fill(state)
    for block in (2, 3):  # SQLite rolls a full transaction back itself: the next one must still start
        with pytest.raises(StateUnwritable) as refused:
            state.settle_step(block, [_sybil_record(block, 1), _sybil_record(block, 2)])
        assert refused.value.cause == "state" and "database or disk is full" in state.write_problem
    assert state.last_step_block() == 1 and len(state.executions()) == 1 and state.window().means() == {1: 1.0}
    _fill(state, 1 << 30)  # space again
    assert state.settle_step(4, [_small(4, 1, 0.0), _small(4, 2)])
    assert state.write_problem is None
    assert state.window().means() == {1: 0.5, 2: 0.5} and state.steps_settled() == 2
    state.close()


class _FullDisk:
    """A state connection on a full disk: every write transaction fails as SQLite fails it."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, *args):
        if sql.startswith("BEGIN"):
            exc = sqlite3.OperationalError("database or disk is full")
            exc.sqlite_errorcode = sqlite3.SQLITE_FULL
            raise exc
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str):
        return getattr(self._conn, name)


@contextlib.contextmanager
def _full_disk(state: ValidatorState) -> Iterator[None]:
    conn = state._conn
    state._conn = _FullDisk(conn)
    try:
        yield
    finally:
        state._conn = conn


async def _health(loop, metrics) -> dict:
    transport = httpx.ASGITransport(app=process.health_app(loop, metrics))
    async with httpx.AsyncClient(transport=transport, base_url="http://validator") as client:
        return (await client.get("/health")).json()


async def test_on_a_full_disk_the_loop_skips_steps_sets_weights_and_stays_up(tmp_path: Path) -> None:
    miner = dev_keypair("dagnet-disk-miner")
    validator_key = dev_keypair("Alice")
    snapshot = (
        MetagraphBuilder(netuid=7, block=100)
        .miner(miner)
        .neuron(validator_key, stake=1_000.0, validator_permit=True)
        .build()
    )
    uid = snapshot.by_hotkey(miner.ss58_address).uid
    async with validator_loop(tmp_path, snapshot, SomeFamilies("dt_inventory")) as (loop, chain, metrics):
        loop.state.settle_step(1, [_small(1, uid, 0.8, hotkey=miner.ss58_address)])
        with _full_disk(loop.state):
            for _ in range(3):
                assert await loop.step(chain.advance()) is None  # skipped, not raised
            assert list(loop.step_outcomes)[-3:] == [StepOutcome.INFRASTRUCTURE] * 3
            assert metrics.infrastructure_failures.labels("state")._value.get() == 3
            assert await loop.maybe_set_weights(chain.head)  # set on chain; recording it does not end the loop
            assert chain.weights_log[-1][0] == chain.head and loop.state.last_weights_block() == chain.head
            body = await _health(loop, metrics)
            assert body["status"] == "degraded" and body["last_weights_block"] == chain.head
            assert any("cannot be written: database or disk is full" in reason for reason in body["reasons"])
        set_at = chain.head
        await loop.step(chain.advance())  # space again: the next write takes the weights with it
        assert loop.step_outcomes[-1] == StepOutcome.IDLE and loop.state.write_problem is None
        body = await _health(loop, metrics)
        assert not any("cannot be written" in reason for reason in body["reasons"])
    reopened = ValidatorState(tmp_path / "validator.sqlite")
    assert reopened.last_weights_block() == set_at and reopened.last_weights() == {uid: 1.0}
    reopened.close()


# -- the instance secret ------------------------------------------------------------------


def test_a_new_path_gets_its_secret_and_keeps_it(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "v.sqlite"
    first = ValidatorState(path)
    secret = first.instance_secret()
    first.close()
    assert sorted(p.name for p in path.parent.iterdir()) == ["v.sqlite"]  # no draft left behind
    again = ValidatorState(path)
    assert again.instance_secret() == secret
    again.close()


def test_an_empty_state_file_is_refused_and_only_reset_makes_a_secret(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    path.touch()
    with pytest.raises(StateRefused, match="is empty .* --reset"):
        ValidatorState(path)
    assert path.stat().st_size == 0  # refused untouched
    state = ValidatorState(path, reset=True)
    assert isinstance(state.instance_secret(), int)
    state.close()


def test_a_state_file_that_lost_its_secret_is_refused_and_reset_keeps_its_history(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    state = ValidatorState(path)
    old = state.instance_secret()
    state.settle_step(1, [_small(1, 1)])
    state.close()
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("DELETE FROM secret")
    with pytest.raises(StateRefused, match="has lost its instance secret.*--reset"):
        ValidatorState(path)
    state = ValidatorState(path, reset=True)
    new = state.instance_secret()
    assert new != old and state.window().means() == {1: 0.5}
    state.close()
    again = ValidatorState(path, reset=True)  # reset once, kept after: a file with its secret opens as it is
    assert again.instance_secret() == new
    again.close()


@pytest.mark.e2e  # a validator process, started as an operator starts it
def test_the_validator_refuses_an_empty_state_file_naming_reset(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    path.touch()
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "neurons.cli",
            "validator",
            "--dev-key",
            "//Alice",
            "--state",
            str(path),
            "--port",
            "0",
            "--network",
            "ws://127.0.0.1:9",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parents[2],
    )
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "--reset" in lines[0], run.stderr
    assert path.stat().st_size == 0
    for command in (["validator", "--state", str(path), "--replay", "1"], ["validator", "tasks", "--state", str(path)]):
        refused = CliRunner().invoke(app, command)
        assert refused.exit_code == 2 and "--reset" in refused.stderr, (command, refused.output)


# -- a real full disk ------------------------------------------------------------------------


@pytest.mark.e2e
@needs_root
def test_a_real_full_disk_skips_steps_and_the_state_stays_consistent(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", "4m") as disk:
        state = ValidatorState(disk / "v.sqlite")
        state.settle_step(1, [_small(1, 1, 1.0)])
        filler = fill(disk)
        refused = 0
        for block in range(2, 6):
            with pytest.raises(StateUnwritable):
                state.settle_step(block, [_sybil_record(block, uid) for uid in range(SYBILS)])
            refused += 1
        state.weights_accepted(5, {1: 1.0})  # set on chain while the disk is full: kept, not raised
        assert state.last_step_block() == 1 and state.window().means() == {1: 1.0} and state.last_weights_block() == 5
        filler.unlink()
        assert state.settle_step(6, [_small(6, 1, 0.0), _small(6, 2)])
        state.close()
        again = ValidatorState(disk / "v.sqlite")
        records = again.executions()
        assert refused == 4 and [r.block for r in records] == [1, 6, 6]
        assert again.window().means() == {1: 0.5, 2: 0.5} and again.last_weights_block() == 5
        assert again._conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        again.close()
