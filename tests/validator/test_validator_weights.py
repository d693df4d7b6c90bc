"""Weights on their own schedule: a due weight-set runs whatever a step is doing, and a
set accepted on chain is always recorded, even when the validator is stopped meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from chain.base import WeightsResult
from miner.app import create_app
from miner.metagraph import StaticMetagraph
from miner.settings import MinerSettings
from planners import load_planner
from protocol.metagraph import MetagraphSnapshot
from subnets.owned import owned_runner
from subnets.registry import default_registry
from support.fakechain import FakeChain
from support.keys import MetagraphBuilder, dev_keypair
from support.peers import _read_request, axon, raw_peer, serve_asgi
from support.polling import until
from support.tasks import SomeFamilies
from validator.client import ClientConfig, MinerClient
from validator.loop import LoopConfig, ValidatorLoop
from validator.state import ExecutionRecord, ValidatorState

VALIDATOR = dev_keypair("Alice")
HONEST = dev_keypair("dagnet-weights-honest")
SYBILS = [dev_keypair(f"dagnet-weights-sybil-{i}") for i in range(4)]
TEMPO = 20


def _held(release: asyncio.Event):
    """A sybil that takes the query and holds it until ``release``, then hangs up: the
    step waits on it as it waits on a plan that runs long."""

    async def behave(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stop: asyncio.Event) -> None:
        await _read_request(reader)
        done = [asyncio.ensure_future(e.wait()) for e in (release, stop)]
        await asyncio.wait(done, return_when=asyncio.FIRST_COMPLETED)
        for waiter in done:
            waiter.cancel()

    return behave


@contextlib.asynccontextmanager
async def _validator(tmp_path: Path, release: asyncio.Event) -> AsyncIterator[tuple[ValidatorLoop, FakeChain, list]]:
    """The validator on a chain of tempo 20, one honest miner and four sybils that hold
    every step; the state already holds scores, so weights are due at once."""
    async with contextlib.AsyncExitStack() as stack:
        builder = MetagraphBuilder(netuid=7).validator(VALIDATOR)
        bare = builder.miner(HONEST).build()
        app = create_app(
            MinerSettings(port=0),
            keypair=HONEST,
            metagraph=StaticMetagraph(bare),
            registry=default_registry(),
            planner=load_planner("good"),
        )
        builder = MetagraphBuilder(netuid=7).validator(VALIDATOR)
        builder.miner(HONEST, axon=axon(await stack.enter_async_context(serve_asgi(app))))
        sybils = []
        for key in SYBILS:
            sybils.append(await stack.enter_async_context(raw_peer(_held(release))))
            builder.miner(key, axon=axon(sybils[-1].url))
        snapshot = builder.build()
        chain = FakeChain(hotkey=VALIDATOR.ss58_address, snapshot=snapshot)
        chain.hyper = replace(chain.hyper, tempo=TEMPO)
        state = ValidatorState(tmp_path / "validator.sqlite")
        stack.callback(state.close)
        state.settle_step(
            chain.head - 1, [_scored(n.uid, n.hotkey) for n in snapshot.neurons if n.hotkey != VALIDATOR.ss58_address]
        )
        client = await stack.enter_async_context(MinerClient(VALIDATOR, config=ClientConfig(timeout_s=300.0)))
        loop = ValidatorLoop(
            chain,
            state,
            client,
            SomeFamilies("dt_inventory"),
            owned_runner=owned_runner,
            config=LoopConfig(poll_s=0.01, synthetic_rate=0.0, tier_shares={"full": 1.0}),
        )
        stack.callback(release.set)  # a failed test lets go of the sybils, to end
        yield loop, chain, sybils


def _uid(snapshot: MetagraphSnapshot | None, key) -> int:
    assert snapshot is not None
    return snapshot.by_hotkey(key.ss58_address).uid


def _scored(uid: int, hotkey: str) -> ExecutionRecord:
    return ExecutionRecord(
        block=99,
        uid=uid,
        hotkey=hotkey,
        task_id="dt_inventory",
        base_task_id="dt_inventory",
        instance_seed=0,
        plan=None,
        metrics=None,
        final_output=None,
        score={"S": 0.5},
        reason=None,
    )


@pytest.mark.e2e
async def test_weights_are_set_every_tempo_while_sybils_hold_the_step(tmp_path: Path) -> None:
    release = asyncio.Event()
    async with _validator(tmp_path, release) as (loop, chain, sybils):
        reads = 0
        head = chain.block

        async def counted() -> int:
            nonlocal reads
            reads += 1
            return await head()

        chain.block = counted
        stop = asyncio.Event()
        runner = asyncio.create_task(loop.run(stop))
        try:
            await until(lambda: all(s.active for s in sybils))  # the step at block 100 is held
            start = chain.head
            for _ in range(4 * TEMPO):  # one block at a time, each seen by the validator before the next
                chain.advance()
                seen = reads
                await until(lambda: reads >= seen + 2, timeout_s=10.0)  # noqa: B023  (called here, within the iteration)
            assert [block for block, _, _ in chain.weights_log] == [start + TEMPO * i for i in range(5)]
            assert loop.state.last_weights_block() == chain.head
            assert all(s.active for s in sybils) and loop.state.last_step_block() == start - 1  # still the one step
        finally:
            stop.set()
            release.set()
            await runner  # the held step settles, and the loop ends
        assert loop.state.last_step_block() == start
        scored = {r.uid: r.reason for r in loop.state.executions(block=start)}
        assert len(scored) == 1 + len(SYBILS) and scored[_uid(loop.snapshot, HONEST)] is None


async def test_a_weight_set_accepted_on_chain_is_recorded_even_when_the_validator_is_cancelled(tmp_path: Path) -> None:
    release = asyncio.Event()
    release.set()  # the sybils hang up at once: steps are quick
    async with _validator(tmp_path, release) as (loop, chain, _):
        accepted, answer = asyncio.Event(), asyncio.Event()
        real = chain.set_weights

        async def slow_answer(*args) -> WeightsResult:
            result = await real(*args)  # the chain has the weights...
            accepted.set()
            await answer.wait()  # ...and its answer is on its way
            return result

        chain.set_weights = slow_answer
        runner = asyncio.create_task(loop.run(asyncio.Event()))
        try:
            await until(accepted.is_set)
        finally:
            runner.cancel()
            answer.set()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
        assert runner.cancelled()
        assert [b for b, _, _ in chain.weights_log] == [loop.state.last_weights_block()]
        assert loop.state.last_weights() == pytest.approx(chain.weights_log[0][1])
