"""The validator on the real embedded chain: the chain node stops for a while, the loop
keeps going, and weights are set again once the chain is back."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from miner.app import create_app
from miner.metagraph import StaticMetagraph
from miner.serving import EVERY_TOOL
from miner.settings import MinerSettings
from planners import load_planner
from protocol.metagraph import MetagraphSnapshot, Neuron, Peer
from subnets.owned import owned_runner
from subnets.registry import default_registry
from support.chain import chain_for, node_process, wait_for_block, wait_listening
from support.keys import dev_keypair
from support.peers import axon, serve_asgi
from support.polling import until
from support.tasks import SomeFamilies, provider_profiles
from validator.client import ClientConfig, MinerClient
from validator.loop import LoopConfig, ValidatorLoop
from validator.providers import FixedProviders
from validator.state import ValidatorState

pytestmark = pytest.mark.e2e


VALIDATOR_URI, MINER_URI, PROVIDER_URI = (
    "//dagnet-outage-validator",
    "//dagnet-outage-miner",
    "//dagnet-outage-provider",
)
GENESIS = {"tempo": 6, "weights_rate_limit": 2, "immunity_period": 1000}
BLOCK_S = 0.5


def _stop(process) -> None:
    process.terminate()
    process.wait(timeout=20)


async def test_the_loop_survives_a_stopped_chain_and_sets_weights_when_it_returns(tmp_path: Path) -> None:
    state_file = tmp_path / "chain.sqlite"
    node = node_process(state_file, BLOCK_S, **GENESIS)
    wait_listening(node)
    validator_chain = chain_for(state_file, VALIDATOR_URI, retries=1, backoff_s=0.1)
    miner_chain = chain_for(state_file, MINER_URI)
    await validator_chain.register()
    await validator_chain.stake(1_000.0)
    await miner_chain.register()
    source = SomeFamilies("rag_comets", "dt_inventory")
    validator_key = dev_keypair("dagnet-outage-validator")
    snapshot = MetagraphSnapshot(
        1,
        0,
        (
            Neuron(0, validator_key.ss58_address, 1_000.0, True),
            Neuron(1, dev_keypair("dagnet-outage-miner").ss58_address),
        ),
    )
    profiles = provider_profiles(source.tasks())

    def app(uri: str, **settings):
        return create_app(
            MinerSettings(port=0, serve=EVERY_TOOL, **settings),
            keypair=dev_keypair(uri.removeprefix("//")),
            metagraph=StaticMetagraph(snapshot),
            registry=default_registry(),
            planner=load_planner("good"),
        )

    stop = asyncio.Event()
    state = ValidatorState(tmp_path / "validator.sqlite")
    try:
        async with contextlib.AsyncExitStack() as stack:
            miner_url = await stack.enter_async_context(serve_asgi(app(MINER_URI)))
            provider_url = await stack.enter_async_context(serve_asgi(app(PROVIDER_URI, provider_tasks=profiles)))
            served = axon(miner_url)
            await miner_chain.serve_axon(served.host, served.port)
            client = await stack.enter_async_context(MinerClient(validator_key, config=ClientConfig(timeout_s=5.0)))
            provider = Peer(99, dev_keypair("dagnet-outage-provider").ss58_address, provider_url)
            loop = ValidatorLoop(
                validator_chain,
                state,
                client,
                source,
                FixedProviders([provider]),
                owned_runner=owned_runner,
                config=LoopConfig(poll_s=0.1),
            )
            runner = asyncio.create_task(loop.run(stop))

            async def weights_set() -> bool:
                return state.last_weights_block() is not None

            await until(weights_set, timeout_s=120.0, every_s=0.1)
            first = state.last_weights_block()
            _stop(node)

            errors = loop.metrics.chain_errors

            async def failing() -> bool:
                return sum(errors.labels(call)._value.get() for call in ("block", "metagraph", "hyperparameters")) >= 3

            await until(failing, timeout_s=120.0, every_s=0.1)
            assert not runner.done()
            settled_during_outage = state.steps_settled()

            node = node_process(state_file, BLOCK_S, **GENESIS)  # the same file: the chain resumes where it was
            wait_listening(node)
            resumed = await wait_for_block(miner_chain, 0)

            async def set_again() -> bool:
                return (state.last_weights_block() or 0) > max(first, resumed)

            await until(set_again, timeout_s=120.0, every_s=0.1)
            assert state.steps_settled() > settled_during_outage
            stop.set()
            await runner
            chain_view = await miner_chain.metagraph()
            assert chain_view.by_hotkey(validator_key.ss58_address).last_update == state.last_weights_block()
    finally:
        state.close()
        if node.poll() is None:
            _stop(node)
        await validator_chain.close()
        await miner_chain.close()
