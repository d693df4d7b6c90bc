"""The validator loop on a fake chain with real HTTP miners: steps, records, weights, outages."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from miner.app import create_app
from miner.metagraph import StaticMetagraph
from miner.serving import EVERY_TOOL
from miner.settings import MinerSettings
from planners import load_planner
from protocol.metagraph import MetagraphSnapshot, Peer
from protocol.outcomes import StepOutcome
from protocol.task import Task
from subnets.owned import owned_runner
from subnets.registry import default_registry
from support.fakechain import FakeChain
from support.keys import dev_keypair
from support.network import serve_miners
from support.peers import serve_asgi
from support.polling import until
from support.tasks import SomeFamilies
from validator.audit import replay
from validator.client import ClientConfig, MinerClient
from validator.loop import LoopConfig, ValidatorLoop
from validator.providers import FixedProviders
from validator.reference import reference
from validator.state import ValidatorState

TASK_IDS = ("dt_inventory", "rag_comets", "code_fizzbuzz")
"""v2 families with roomy latency limits (loopback HTTP), one per type but agent."""
VALIDATOR = dev_keypair("Alice")
KEYS = {"good": dev_keypair("dagnet-loop-good"), "naive": dev_keypair("dagnet-loop-naive")}
PROVIDER = dev_keypair("dagnet-loop-provider")


def _tasks() -> tuple[Task, ...]:
    return SomeFamilies(*TASK_IDS).tasks()


def _profiles(tasks: tuple[Task, ...]) -> dict:
    merged = {}
    for task in tasks:
        merged.update(task.available_tools)
    return merged


# A step over this network is an e2e test: real HTTP servers, miners planning in forked
# processes, providers sleeping each subnet's advertised latency in real time (seconds a step).
@contextlib.asynccontextmanager
async def _network(tasks: tuple[Task, ...], permit: bool = True) -> AsyncIterator[tuple[MetagraphSnapshot, Peer]]:
    """Two miners (good, naive) and one provider of every subnet, all on loopback; the
    validator has a validator permit when ``permit``."""
    async with contextlib.AsyncExitStack() as stack:
        bare, served = await serve_miners(VALIDATOR, KEYS, stack, permit=permit)
        provider_app = create_app(
            MinerSettings(port=0, serve=EVERY_TOOL, provider_subnets=_profiles(tasks)),
            keypair=PROVIDER,
            metagraph=StaticMetagraph(bare),
            registry=default_registry(),
            planner=load_planner("good"),
        )
        provider = Peer(
            uid=99, hotkey=PROVIDER.ss58_address, url=await stack.enter_async_context(serve_asgi(provider_app))
        )
        yield served, provider


FULL_ONLY = {"tier_shares": {"full": 1.0}}
"""The loop's mechanics are tested with a naive miner among the miners, and naive plans
only full-tier packages (tests/validator/test_validator_tiers.py tests the tiers themselves)."""


@contextlib.asynccontextmanager
async def _loop(tmp_path: Path, *, permit: bool = True, **config) -> AsyncIterator[tuple[ValidatorLoop, FakeChain]]:
    tasks = _tasks()
    async with _network(tasks, permit) as (snapshot, provider):
        chain = FakeChain(hotkey=VALIDATOR.ss58_address, snapshot=snapshot)
        state = ValidatorState(tmp_path / "validator.sqlite")
        async with MinerClient(VALIDATOR, config=ClientConfig(timeout_s=5.0)) as client:
            loop = ValidatorLoop(
                chain,
                state,
                client,
                SomeFamilies(*TASK_IDS),
                FixedProviders([provider]),
                owned_runner=owned_runner,
                reference=reference(),
                config=LoopConfig(**{"synthetic_rate": 0.0, **FULL_ONLY, **config}),
            )
            try:
                yield loop, chain
            finally:
                await loop.feedback.close()  # while the client is open, as ValidatorLoop.run ends
                state.close()


def _uid(loop: ValidatorLoop, name: str) -> int:
    return loop.snapshot.by_hotkey(KEYS[name].ss58_address).uid


STEPS_UNDER_LOAD = 6
"""Steps a test may take until a miner has planned, or scored. The miners plan and the tools
run over loopback HTTP on the wall clock, so on a loaded machine a reply can miss the client's
time-out and a call can time out (good's S was 0 on a step at a load of 10; both miners' at a
load of 12), and which miner scored more is the machine's business too (naive 0.744, good
0.707 once at load 8). That weights wait for a score and then follow the scores is the loop's."""


@pytest.mark.e2e
async def test_steps_settle_records_and_weights_follow_the_scores(tmp_path: Path) -> None:
    async with _loop(tmp_path) as (loop, chain):
        weighed: dict[int, float] = {}
        steps = 0
        while not chain.weights_log and steps < STEPS_UNDER_LOAD:
            summary = await loop.step(chain.head)
            steps += 1
            assert summary is not None and summary.base_task_id in TASK_IDS
            weighed = loop.state.window().means()  # what weights set now are made of
            assert await loop.maybe_set_weights(chain.head) == any(m > 0 for m in weighed.values()), weighed
            chain.advance()
        assert chain.weights_log, f"no miner scored in {steps} steps"
        set_at = chain.head - 1
        assert await loop.step(chain.head) is not None  # the next step, in the same tempo, sets none
        assert not await loop.maybe_set_weights(chain.head)
        steps += 1
        good, naive = _uid(loop, "good"), _uid(loop, "naive")
        records = loop.state.executions()
        assert len(records) == 2 * steps and {r.uid for r in records} == {good, naive}
        assert all(r.plan is not None and r.plan_hash and r.metrics for r in records)
        first, second = sorted((good, naive), key=weighed.__getitem__, reverse=True)
        assert weighed[first] > weighed[second], weighed
        ((block, weights, version),) = chain.weights_log
        assert block == set_at and weights[first] > weights.get(second, 0.0)
        assert version == loop.config.version_key
        assert loop.state.last_weights() == pytest.approx(weights)
        for record in records:  # every settled execution re-scores bit for bit
            assert replay(record, loop.source).identical, record


async def test_a_miner_refusing_a_validator_without_a_permit_charges_no_one(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="validator")
    async with _loop(tmp_path, permit=False) as (loop, chain):
        summary = await loop.step(chain.head)
        assert summary is not None and summary.scores == {}
        chain.advance()
        await loop.step(chain.head)
        assert loop.state.executions() == [] and loop.state.window().means() == {}
        uids = {_uid(loop, name) for name in KEYS}
    lines = [r.getMessage() for r in caplog.records if r.name == "validator.observation"]
    assert len(lines) == 4 and {int(line.split()[3]) for line in lines} == uids, lines  # 2 miners, 2 steps
    assert all("not scored" in line and "no_validator_permit" in line for line in lines), lines
    said = [
        r.getMessage()
        for r in caplog.records
        if r.name == "validator.chainview" and "no validator permit" in r.getMessage()
    ]
    assert len(said) == 1 and said[0].startswith("this validator has no validator permit on netuid 7 yet"), said


@pytest.mark.e2e
async def test_every_score_is_explained_in_the_log_in_records_and_by_replay(tmp_path: Path, caplog) -> None:
    import json

    from typer.testing import CliRunner

    from neurons.cli import app

    caplog.set_level(logging.INFO, logger="validator")
    async with _loop(tmp_path) as (loop, chain):
        await loop.step(chain.head)
        chain.advance()
        await loop.step(chain.head)
        stored = {r.id: r for r in loop.state.executions()}
    lines = [r.getMessage() for r in caplog.records if r.name == "validator.observation"]
    assert len(lines) == len(stored) == 4, lines
    for record in stored.values():  # one line per miner per step: uid, task, tier, S and its parts or why 0
        line = f"block {record.block} uid {record.uid} task {record.task_id} ({record.hint_tier} tier): "
        assert line + record.explain() in lines, (line, lines)
        assert record.explain().startswith(
            f"S={record.score['S']:.3f} (success" if record.reason is None else f"S=0: {record.reason}"
        )

    state = str(tmp_path / "validator.sqlite")
    listed = CliRunner().invoke(app, ["validator", "records", "--state", state, "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)
    assert [row["id"] for row in rows] == sorted(stored)
    assert all(
        row["explanation"] == stored[row["id"]].explain() and row["uid"] == stored[row["id"]].uid for row in rows
    )
    some = stored[max(stored)]
    narrowed = CliRunner().invoke(
        app,
        [
            "validator",
            "records",
            "--state",
            state,
            "--json",
            "--miner",
            str(some.uid),
            "--task",
            some.base_task_id,
            "--last",
            "1",
        ],
    )
    assert [row["id"] for row in json.loads(narrowed.stdout)] == [some.id], narrowed.output
    table = CliRunner().invoke(app, ["validator", "records", "--state", state, "--miner", str(some.uid)])
    assert table.exit_code == 0 and some.explain() in table.stdout and "tier" in table.stdout.splitlines()[0]
    replayed = CliRunner().invoke(app, ["validator", "--state", state, "--replay", str(some.id)])
    assert replayed.exit_code == 0, replayed.output
    assert f"record {some.id}: {some.explain()}" in replayed.stderr


@pytest.mark.e2e
async def test_the_task_is_the_hash_pick_over_active_tasks(tmp_path: Path) -> None:
    from validator.sampling import pick_task

    async with _loop(tmp_path) as (loop, chain):
        summary = await loop.step(chain.head)
        assert summary.base_task_id == pick_task(VALIDATOR.ss58_address, chain.head, _tasks()).task_id


@pytest.mark.e2e
async def test_at_the_real_rate_records_store_the_draw_and_synthetic_ones_replay(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from neurons.cli import app
    from validator.sampling import SYNTHETIC_RATE, draw_task

    async with _loop(tmp_path, synthetic_rate=SYNTHETIC_RATE) as (loop, chain):
        tasks = _tasks()
        draws = {
            b: draw_task(loop.hotkey, loop.stepper.secret, b, tasks, synthetic_rate=loop.config.synthetic_rate)
            for b in range(chain.head, chain.head + 4000)
        }
        assert abs(sum(d.synthetic for d in draws.values()) / len(draws) - SYNTHETIC_RATE) < 0.025
        synthetic = [b for b, d in draws.items() if d.synthetic][:2]
        plain = [b for b, d in draws.items() if not d.synthetic][:2]
        for block in sorted(synthetic + plain):
            chain.head = block
            assert await loop.step(block) is not None
        records = loop.state.executions()
        assert {r.block for r in records} == set(synthetic + plain) and len(records) == 8
        for record in records:
            expected = draws[record.block]
            assert (record.base_task_id, record.instance_seed, record.synthetic) == (
                expected.base.task_id,
                expected.seed,
                expected.synthetic,
            )
            assert record.task_id.startswith("syn_") == record.synthetic
            assert replay(record, loop.source).identical, record
        stored = next(r for r in records if r.synthetic and r.metrics is not None)
    result = CliRunner().invoke(
        app, ["validator", "--state", str(tmp_path / "validator.sqlite"), "--replay", str(stored.id)]
    )
    assert result.exit_code == 0 and '"identical": true' in result.stdout, result.output


@pytest.mark.e2e
async def test_a_refused_set_weights_is_logged_and_retried_when_allowed(tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="validator.loop")
    async with _loop(tmp_path) as (loop, chain):
        await loop.step(chain.head)
        chain._last_set = chain.head - 1  # another set landed one block ago, by the chain's count
        assert not await loop.maybe_set_weights(chain.head)
        assert "SettingWeightsTooFast" in caplog.text
        assert loop.state.last_weights_block() is None
        for _ in range(3):
            chain.advance()
            assert not await loop.maybe_set_weights(chain.head)
        chain.advance()
        assert await loop.maybe_set_weights(chain.head)
        assert [b for b, _, _ in chain.weights_log] == [chain.head]
        assert len(chain.refusals) == 4
        assert loop.metrics.weights_set.labels("refused")._value.get() == 4
        # once accepted, the next set waits a full tempo
        chain.advance(chain.hyper.tempo - 1)
        assert not await loop.maybe_set_weights(chain.head)
        chain.advance()
        assert await loop.maybe_set_weights(chain.head)


@pytest.mark.e2e
async def test_a_chain_outage_stops_nothing_and_weights_are_set_when_it_returns(tmp_path: Path) -> None:
    async with _loop(tmp_path, poll_s=0.01) as (loop, chain):
        stop = asyncio.Event()
        runner = asyncio.create_task(loop.run(stop))
        await until(lambda: loop.state.steps_settled() >= 1 and len(chain.weights_log) >= 1)  # weights: their own task
        chain.down = True
        await until(lambda: loop.metrics.chain_errors.labels("block")._value.get() >= 3)
        assert not runner.done()
        before = loop.state.steps_settled()
        chain.advance(chain.hyper.tempo)  # blocks went by while the validator could not see them
        chain.down = False
        await until(lambda: loop.state.steps_settled() > before and len(chain.weights_log) >= 2)
        stop.set()
        await runner
        assert chain.weights_log[-1][0] == chain.head


async def test_a_step_that_cannot_reach_the_chain_is_counted_not_raised(tmp_path: Path) -> None:
    async with _loop(tmp_path) as (loop, chain):
        chain.down = True
        assert await loop.step(chain.head) is None
        assert not await loop.maybe_set_weights(chain.head)
        assert loop.state.steps_settled() == 0
        assert loop.metrics.chain_errors.labels("metagraph")._value.get() == 1
        assert list(loop.step_outcomes) == [StepOutcome.INFRASTRUCTURE]
        assert loop.metrics.infrastructure_failures.labels("chain")._value.get() == 1


@pytest.mark.e2e
@pytest.mark.parametrize("sabotage", ["scorer", "state"])
async def test_a_failing_step_does_not_end_the_loop(tmp_path: Path, monkeypatch, sabotage: str) -> None:
    async with _loop(tmp_path) as (loop, chain):
        if sabotage == "scorer":  # only on miners' outputs: the reference is judged fine, so the outputs are to blame
            monkeypatch.setattr("validator.judging.score_execution", _boom)
        else:
            monkeypatch.setattr(loop.state, "settle_step", _boom)
        summary = await loop.step(chain.head)
        if sabotage == "scorer":  # the step settles with every miner at 0 and the reason kept
            steps = 1
            while not _planned(loop.state) and steps < STEPS_UNDER_LOAD:
                chain.advance()
                summary = await loop.step(chain.head)
                steps += 1
            planned = _planned(loop.state)
            assert summary is not None and set(summary.scores.values()) == {0.0}
            assert planned and all(r.reason.startswith("scoring error") for r in planned)
        else:
            assert summary is None and loop.metrics.steps.labels("error")._value.get() == 1
            assert list(loop.step_outcomes) == [StepOutcome.INFRASTRUCTURE]
            assert loop.metrics.infrastructure_failures.labels("step")._value.get() == 1


def _planned(state: ValidatorState) -> list:
    """The records whose answer became a plan, so reached the scorer; one whose reply missed
    the client's time-out (:data:`STEPS_UNDER_LOAD`) keeps that reason instead."""
    return [r for r in state.executions() if r.plan is not None]


def _boom(*args, **kwargs):
    raise RuntimeError("boom")


@pytest.mark.e2e
async def test_dagnet_validator_replay_rescores_a_stored_record(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from neurons.cli import app

    async with _loop(tmp_path) as (loop, chain):
        await loop.step(chain.head)
        record = loop.state.executions()[0]
    state = str(tmp_path / "validator.sqlite")
    result = CliRunner().invoke(app, ["validator", "--state", state, "--replay", str(record.id)])
    assert result.exit_code == 0, result.output
    assert '"identical": true' in result.stdout
    missing = CliRunner().invoke(app, ["validator", "--state", state, "--replay", "999"])
    assert missing.exit_code == 2 and "no execution record 999" in missing.stderr


async def test_a_block_with_nothing_to_do_is_tried_once(tmp_path: Path) -> None:
    async with _loop(tmp_path, poll_s=0.01) as (loop, chain):
        chain.snapshot = MetagraphSnapshot(7, 0, tuple(n for n in chain.snapshot.neurons if n.axon is None))
        calls = {"block": 0, "metagraph": 0}
        real = {"block": chain.block, "metagraph": chain.metagraph}

        def counting(name):
            async def call(*args):
                calls[name] += 1
                return await real[name](*args)

            return call

        chain.block, chain.metagraph = counting("block"), counting("metagraph")
        stop = asyncio.Event()
        runner = asyncio.create_task(loop.run(stop))
        await until(lambda: calls["metagraph"] == 1)
        polled = calls["block"]
        await until(lambda: calls["block"] >= polled + 10)  # the loop has looked at the head again and again
        assert calls["metagraph"] == 1
        chain.advance()
        await until(lambda: calls["metagraph"] == 2)
        stop.set()
        await runner
        assert loop.state.steps_settled() == 0
