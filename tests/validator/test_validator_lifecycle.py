"""The task lifecycle peers cannot steer, and steps lost to infrastructure charging nobody.

Validators here run on a fake chain with real HTTP miners on loopback and execute
every plan themselves (owned execution, simulated time); their reference is the one
``dagnet validator`` wires in (``validator.reference.reference``: the ``good`` planner).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from chain.base import Hyperparameters
from miner.app import create_app
from miner.metagraph import StaticMetagraph
from miner.settings import MinerSettings
from neurons.cli import app
from planners import load_planner
from protocol.outcomes import StepOutcome
from protocol.task import Task
from subnets.owned import owned_runner
from subnets.registry import default_registry
from support.fakechain import FakeChain
from support.keys import MetagraphBuilder, dev_keypair
from support.peers import serve_asgi, serving
from support.tasks import SomeFamilies
from validator.client import ClientConfig, MinerClient
from validator.lifecycle import Reference
from validator.loop import LoopConfig, TaskSource, ValidatorLoop
from validator.reference import reference
from validator.state import ACTIVE, COOL_OFF_TEMPOS, SET_ASIDE, SET_ASIDE_AFTER, ReferenceRun, ValidatorState

VALIDATOR = dev_keypair("Alice")
TEMPO = 3
SIX = ("dt_inventory", "dt_grades", "rag_comets", "rag_towns", "agent_trip", "agent_invoice")
"""Six families whose plans run in milliseconds on owned execution (no sandbox)."""


def _miners(strategies: Sequence[str]) -> list[tuple[str, object]]:
    return [(strategy, dev_keypair(f"dagnet-lifecycle-{i}-{strategy}")) for i, strategy in enumerate(strategies)]


@contextlib.asynccontextmanager
async def _validator(
    tmp_path: Path,
    source: TaskSource,
    strategies: Sequence[str],
    *,
    judge: Reference | None = None,
) -> AsyncIterator[tuple[ValidatorLoop, FakeChain, dict[str, int]]]:
    """A validator with owned execution over ``source``, one miner per strategy; yields
    the loop, its chain (tempo :data:`TEMPO`) and each miner's uid by ``strategy#index``."""
    miners = _miners(strategies)
    builder = MetagraphBuilder(netuid=7).validator(VALIDATOR, stake=1_000.0)
    for _, key in miners:
        builder.miner(key)
    bare = builder.build()
    async with contextlib.AsyncExitStack() as stack:
        urls = {}
        for strategy, key in miners:
            miner = create_app(
                MinerSettings(port=0),
                keypair=key,
                metagraph=StaticMetagraph(bare),
                registry=default_registry(),
                planner=load_planner(strategy),
            )
            urls[key.ss58_address] = await stack.enter_async_context(serve_asgi(miner))
        chain = FakeChain(
            hotkey=VALIDATOR.ss58_address,
            snapshot=serving(bare, urls),
            hyper=Hyperparameters(
                tempo=TEMPO,
                weights_rate_limit=TEMPO,
                immunity_period=0,
                max_weight_limit=1.0,
                min_allowed_weights=0,
                commit_reveal_enabled=False,
            ),
        )
        uids = {f"{strategy}#{i}": bare.by_hotkey(key.ss58_address).uid for i, (strategy, key) in enumerate(miners)}
        state = stack.enter_context(contextlib.closing(ValidatorState(tmp_path / "validator.sqlite")))
        client = await stack.enter_async_context(MinerClient(VALIDATOR, config=ClientConfig(timeout_s=5.0)))
        yield (
            ValidatorLoop(
                chain,
                state,
                client,
                source,
                owned_runner=owned_runner,
                reference=judge or reference(),
                config=LoopConfig(synthetic_rate=0.0),
            ),
            chain,
            uids,
        )


class BrokenGenerator(SomeFamilies):
    """The named families, with ``broken``'s generator drawing a reference no plan can meet."""

    def __init__(self, broken: str, *task_ids: str) -> None:
        super().__init__(broken, *task_ids)
        self.broken = broken

    def instance(self, task: Task, seed: int) -> Task:
        drawn = super().instance(task, seed)
        if task.task_id != self.broken:
            return drawn
        return drawn.model_copy(update={"reference": {"expected_output": {"total": -1}}})


def _old_rule_would_set_aside(state: ValidatorState, task_id: str) -> bool:
    """The rule this lifecycle replaced: more than 70 % of the hotkeys scored on a task average under 0.1."""
    by_hotkey: dict[str, list[float]] = {}
    for record in state.executions():
        if record.base_task_id == task_id:
            by_hotkey.setdefault(record.hotkey, []).append(record.score["S"])
    means = [sum(scores) / len(scores) for scores in by_hotkey.values()]
    return bool(means) and sum(m < 0.1 for m in means) > 0.7 * len(means)


@pytest.mark.e2e
async def test_three_sybils_with_invalid_plans_set_aside_no_task_and_the_honest_miner_keeps_the_weight(
    tmp_path: Path,
) -> None:
    async with _validator(tmp_path, SomeFamilies(*SIX), ["good", "invalid", "invalid", "invalid"]) as (
        loop,
        chain,
        uids,
    ):
        first = chain.head
        while chain.head < first + 10 * TEMPO:  # ten tempos, one step per block
            assert await loop.step(chain.head) is not None
            await loop.maybe_set_weights(chain.head)
            chain.advance()
        state = loop.state
        scored = {r.base_task_id for r in state.executions()}
        assert len(scored) >= 4, scored
        assert all(_old_rule_would_set_aside(state, task_id) for task_id in scored)  # the attack is on
        assert {t: (lc.state, lc.reference_failures) for t, lc in state.task_lifecycles().items()} == {
            task_id: (ACTIVE, 0) for task_id in SIX
        }
        assert list(loop.step_outcomes)[-10:] == [StepOutcome.SETTLED] * 10
        honest = uids["good#0"]
        block, weights, _ = chain.weights_log[-1]
        assert block >= first + 9 * TEMPO and len(chain.weights_log) >= 9
        # good is the reference: nobody beats it, this chain has no owner uid to burn to, so
        # the floor takes it all, and the sybils scored 0 and get none of it
        assert weights == {honest: pytest.approx(1.0)}


async def test_a_task_whose_generator_is_broken_is_set_aside_and_returns_after_the_cool_off(tmp_path: Path) -> None:
    async with _validator(tmp_path, BrokenGenerator("dt_inventory"), ["good"]) as (loop, chain, _):
        for _ in range(SET_ASIDE_AFTER):
            assert await loop.step(chain.head) is None
            chain.advance()
        since = chain.head - 1
        lifecycle = loop.state.task_lifecycles()["dt_inventory"]
        assert (lifecycle.state, lifecycle.since_block) == (SET_ASIDE, since)
        assert lifecycle.until_block == since + COOL_OFF_TEMPOS * TEMPO
        assert lifecycle.reason.startswith("the reference output has quality 0")
        assert lifecycle.reference_failures == SET_ASIDE_AFTER
        # no task is active now, yet the cool-off ends at its block
        while chain.head < lifecycle.until_block:
            assert await loop.step(chain.head) is None
            assert loop.state.task_states()["dt_inventory"] == SET_ASIDE
            chain.advance()
        assert await loop.step(chain.head) is None  # active again at until_block, still broken
        returned = loop.state.task_lifecycles()["dt_inventory"]
        assert (returned.state, returned.reference_failures, returned.since_block) == (ACTIVE, 1, None)
        assert loop.state.executions() == [] and loop.state.window().means() == {}  # no miner charged
        assert StepOutcome.INFRASTRUCTURE not in loop.step_outcomes


@pytest.mark.e2e
async def test_a_broken_task_leaves_the_others_scored(tmp_path: Path) -> None:
    source = BrokenGenerator("dt_inventory", "rag_comets")
    async with _validator(tmp_path, source, ["good"]) as (loop, chain, uids):
        for _ in range(12):
            await loop.step(chain.head)
            chain.advance()
        assert loop.state.task_states() == {"dt_inventory": SET_ASIDE, "rag_comets": ACTIVE}
        records = loop.state.executions()
        assert records and {r.base_task_id for r in records} == {"rag_comets"}
        assert loop.state.window().mean(uids["good#0"]) > 0.5


def _crashing_planner(package, prior):
    raise RuntimeError("planner bug")


def _boom(*args, **kwargs):
    raise RuntimeError("boom")


@pytest.mark.parametrize("cause", ["scorer", "reference", "executor", "chain"])
async def test_an_infrastructure_failure_charges_no_miner_and_no_task(tmp_path: Path, monkeypatch, cause: str) -> None:
    judge = reference()
    if cause == "reference":
        judge = Reference(planner=_crashing_planner, runner=owned_runner)
    async with _validator(tmp_path, SomeFamilies("dt_inventory"), ["good", "naive"], judge=judge) as (loop, chain, _):
        with monkeypatch.context() as patch:
            if cause == "scorer":  # the scorer itself: every judgement raises
                patch.setattr("engine.evaluate.score_run", _boom)
            if cause == "executor":  # executing the reference's plan raises
                patch.setattr("validator.lifecycle.run_owned", _boom)
            chain.down = cause == "chain"
            assert await loop.step(chain.head) is None
        assert list(loop.step_outcomes) == [StepOutcome.INFRASTRUCTURE]
        assert loop.metrics.infrastructure_failures.labels(cause)._value.get() == 1
        assert loop.metrics.steps.labels("error")._value.get() == 1
        state = loop.state
        assert state.steps_settled() == 0 and state.executions() == [] and state.window().means() == {}
        assert {t: (lc.state, lc.reference_failures) for t, lc in state.task_lifecycles().items()} in (
            {},
            {"dt_inventory": (ACTIVE, 0)},
        )
        if cause in ("scorer", "chain"):  # the fault is gone: the next step settles
            chain.down = False
            chain.advance()
            assert await loop.step(chain.head) is not None
            assert loop.step_outcomes[-1] == StepOutcome.SETTLED


async def test_a_machine_that_cannot_judge_code_charges_no_code_task(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("scoring.quality.code.isolation_available", lambda: "none")
    async with _validator(tmp_path, SomeFamilies("code_fizzbuzz"), ["good"]) as (loop, chain, _):
        for _ in range(SET_ASIDE_AFTER + 1):
            assert await loop.step(chain.head) is None
            chain.advance()
        assert list(loop.step_outcomes) == [StepOutcome.INFRASTRUCTURE] * (SET_ASIDE_AFTER + 1)
        assert loop.metrics.infrastructure_failures.labels("scorer")._value.get() == SET_ASIDE_AFTER + 1
        assert loop.state.task_lifecycles()["code_fizzbuzz"].reference_failures == 0
        assert loop.state.executions() == []


async def test_a_lost_head_read_is_recorded_as_an_infrastructure_failure(tmp_path: Path) -> None:
    import asyncio

    async with _validator(tmp_path, SomeFamilies("dt_inventory"), ["good"]) as (loop, chain, _):
        chain.down = True
        loop.config = LoopConfig(poll_s=0.01)
        stop = asyncio.Event()
        runner = asyncio.create_task(loop.run(stop))
        async with asyncio.timeout(30):
            while loop.metrics.infrastructure_failures.labels("chain")._value.get() < 3:
                await asyncio.sleep(0.01)
        stop.set()
        await runner
        assert set(loop.step_outcomes) == {StepOutcome.INFRASTRUCTURE} and loop.state.steps_settled() == 0


# -- dagnet validator tasks --------------------------------------------------------------


def _state_with_one_task_set_aside(path: Path) -> None:
    state = ValidatorState(path)
    state.task_states(["dt_inventory", "rag_comets"])
    for block in range(200, 200 + SET_ASIDE_AFTER):
        state.settle_step(block, [], ReferenceRun("dt_inventory", "the reference output has quality 0"), tempo=10)
    state.settle_step(300, [], ReferenceRun("rag_comets", "once"), tempo=10)
    state.close()


def test_dagnet_validator_tasks_lists_the_lifecycle_and_reset_clears_it(tmp_path: Path) -> None:
    path = tmp_path / "validator.sqlite"
    _state_with_one_task_set_aside(path)
    last = 200 + SET_ASIDE_AFTER - 1
    listed = CliRunner().invoke(app, ["validator", "tasks", "--state", str(path), "--json"])
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout) == [
        {
            "task_id": "dt_inventory",
            "state": SET_ASIDE,
            "since_block": last,
            "until_block": last + COOL_OFF_TEMPOS * 10,
            "reason": "the reference output has quality 0",
            "reference_failures": SET_ASIDE_AFTER,
        },
        {
            "task_id": "rag_comets",
            "state": ACTIVE,
            "since_block": None,
            "until_block": None,
            "reason": None,
            "reference_failures": 1,
        },
    ]
    table = CliRunner().invoke(app, ["validator", "tasks", "--state", str(path)])
    assert table.exit_code == 0, table.output
    header, broken, fine = table.stdout.splitlines()
    assert header.split()[:3] == ["task", "state", "since"]
    assert broken.split()[:5] == [
        "dt_inventory",
        SET_ASIDE,
        str(last),
        str(last + COOL_OFF_TEMPOS * 10),
        str(SET_ASIDE_AFTER),
    ]
    assert broken.endswith("the reference output has quality 0")
    assert fine.split() == ["rag_comets", ACTIVE, "-", "-", "1", "-"]

    reset = CliRunner().invoke(app, ["validator", "tasks", "--state", str(path), "--reset", "--json"])
    assert reset.exit_code == 0, reset.output
    assert [
        (t["task_id"], t["state"], t["reference_failures"], t["until_block"]) for t in json.loads(reset.stdout)
    ] == [
        ("dt_inventory", ACTIVE, 0, None),
        ("rag_comets", ACTIVE, 0, None),
    ]
    state = ValidatorState(path)
    assert state.task_states() == {"dt_inventory": ACTIVE, "rag_comets": ACTIVE}
    state.close()


def test_dagnet_validator_tasks_needs_an_existing_state_file(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.sqlite"
    result = CliRunner().invoke(app, ["validator", "tasks", "--state", str(missing)])
    assert result.exit_code == 2 and result.stderr.strip() == f"error: no state file {missing}"
    assert not missing.exists()


def test_dagnet_validator_help_lists_the_run_options_and_the_tasks_command() -> None:
    result = CliRunner().invoke(app, ["validator", "--help"])
    assert result.exit_code == 0, result.output
    for option in ("--wallet.name", "--dev-key", "--network", "--state", "--replay", "--sample-size"):
        assert option in result.stdout
    assert "tasks" in result.stdout.split("Commands:")[1]


async def test_a_validator_without_a_sandbox_sends_no_code_task_and_scores_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The start-up check finds no sandbox (as in a container without the validator's options):
    code_fizzbuzz is never sent, every step settles on the other family, no step fails."""
    from validator import sources as process

    monkeypatch.setattr(process, "isolation_available", lambda: "rlimits")
    monkeypatch.setattr("scoring.quality.code.isolation_available", lambda: "rlimits")
    check = process.start_sandbox_check()
    gate = process.CodeGate(check)
    source = process.GatedTasks(SomeFamilies("code_fizzbuzz", "dt_inventory"), gate)
    async with _validator(tmp_path, source, ["good"]) as (loop, chain, uids):
        assert await check is not None and not gate.judges_code()
        for _ in range(2 * TEMPO):
            assert await loop.step(chain.head) is not None
            chain.advance()
        assert set(loop.step_outcomes) == {StepOutcome.SETTLED}
        assert {r.base_task_id for r in loop.state.executions()} == {"dt_inventory"}
        assert loop.state.window().means()[uids["good#0"]] > 0


async def test_the_gate_lets_code_through_once_the_sandbox_check_passes() -> None:
    from validator.sources import CodeGate, GatedTasks

    check: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
    gate = CodeGate(check)
    source = GatedTasks(SomeFamilies("code_fizzbuzz", "dt_inventory"), gate)
    assert [t.task_id for t in source.tasks()] == ["dt_inventory"] and "code" not in gate.types()  # not settled yet
    check.set_result(None)
    assert {t.task_id for t in source.tasks()} == {"code_fizzbuzz", "dt_inventory"} and "code" in gate.types()


def test_families_drawn_for_a_validator_without_a_sandbox_hold_no_code() -> None:
    from tasks.drawn import TYPES, drawn_families

    no_code = tuple(t for t in TYPES if t != "code")
    assert "code" in {f.task_type for f in drawn_families(5, 31, len(TYPES))}
    assert {f.task_type for f in drawn_families(5, 31, len(TYPES), types=no_code)} == set(no_code)
