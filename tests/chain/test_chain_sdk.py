"""The bittensor path end to end: bt.Client + the SDK's own intents over the embedded substrate."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

from chain.base import ChainError
from chain.embedded import reads
from chain.embedded.state import ChainState
from chain.sdk import SnapshotBuilder
from support.chain import chain_for, node_process, running_node, wait_for_block, wait_for_next_epoch, wait_listening

pytestmark = pytest.mark.e2e


@pytest.fixture
def node(tmp_path):
    state = tmp_path / "chain.sqlite"
    with running_node(state):
        yield state


async def _registered(state, uri, stake=0.0):
    chain = chain_for(state, uri)
    await chain.connect()
    await chain.register()
    if stake:
        await chain.stake(stake)
    return chain


async def _next_epoch(chain):
    return await wait_for_next_epoch(chain)


async def test_metagraph_fields_come_from_the_sdk_metagraph(node):
    validator = await _registered(node, "//V", stake=500)
    miner = await _registered(node, "//M1")
    await miner.serve_axon("127.0.0.1", 8091)
    snapshot = await miner.metagraph()
    v, m = snapshot.by_hotkey(validator.hotkey), snapshot.by_hotkey(miner.hotkey)
    assert (v.uid, m.uid) == (0, 1)
    assert v.stake >= 500.0  # plus whatever epochs have paid since
    assert v.coldkey == m.coldkey != ""
    assert (m.axon.host, m.axon.port) == ("127.0.0.1", 8091)
    assert v.axon is None
    assert v.registered_block <= m.registered_block <= snapshot.block
    hyper = await miner.hyperparameters()
    assert (hyper.tempo, hyper.weights_rate_limit, hyper.commit_reveal_enabled, hyper.weights_version) == (
        5,
        3,
        False,
        0,
    )
    await _next_epoch(miner)
    assert (await miner.metagraph()).by_hotkey(validator.hotkey).validator_permit


async def test_set_weights_refused_by_rate_limit_then_accepted(tmp_path):
    node = tmp_path / "chain.sqlite"
    with running_node(node, block_time=0.25, weights_rate_limit=12):
        await _rate_limited_then_accepted(node)


async def _rate_limited_then_accepted(node):
    validator = await _registered(node, "//V", stake=500)
    for uri in ("//M1", "//M2"):
        await _registered(node, uri)
    await _next_epoch(validator)
    first = await validator.set_weights([1, 2], [0.7, 0.3], version_key=0)
    assert first.success, first.message
    again = await validator.set_weights([1, 2], [0.5, 0.5], version_key=0)
    assert not again.success and "rate limit is 12 blocks" in again.message
    await wait_for_block(validator, first.block + 12)
    later = await validator.set_weights([1, 2], [0.5, 0.5], version_key=0)
    assert later.success, later.message
    snapshot = await validator.metagraph()
    assert snapshot.by_uid(0).last_update == later.block


async def test_chain_refusals_surface_with_the_sdk_message(tmp_path):
    node = tmp_path / "chain.sqlite"
    with running_node(node, tempo=10_000):
        await _refusals(node)


async def _refusals(node):
    chain = await _registered(node, "//V")
    await _registered(node, "//M1")
    no_permit = await chain.set_weights([1], [1.0], version_key=0)
    assert not no_permit.success and "no validator permit" in no_permit.message
    with pytest.raises(ChainError, match="already registered") as info:
        await chain.register()
    assert not info.value.transient
    stranger = chain_for(node, "//Nobody")
    result = await stranger.set_weights([0], [1.0], version_key=0)
    assert not result.success and "not registered" in result.message
    with pytest.raises(ChainError, match="not registered"):
        await stranger.stake(10)
    with pytest.raises(ChainError, match="below the minimum"):
        await chain.stake(0.001)


async def test_a_stopped_chain_is_a_transient_error_and_a_restarted_one_resumes(tmp_path):
    state = tmp_path / "chain.sqlite"
    with running_node(state):
        chain = await _registered(state, "//V")
        chain._retries, chain._backoff = 1, 0.01
        before = await chain.block()
    with pytest.raises(ChainError) as info:
        await chain.metagraph()
    assert info.value.transient
    with running_node(state):
        snapshot = await chain.metagraph()
    assert snapshot.by_hotkey(chain.hotkey).uid == 0 and snapshot.block >= before


async def test_a_killed_chain_is_an_outage_not_a_frozen_head(tmp_path):
    state = tmp_path / "chain.sqlite"
    node = node_process(state)
    try:
        wait_listening(node)
        chain = chain_for(state, "//R", retries=0)
        await wait_for_block(chain, 2)
    finally:
        node.kill()
        node.wait(timeout=10)
    with pytest.raises(ChainError, match="not running") as info:
        await chain.block()
    assert info.value.transient
    await chain.close()


def test_the_served_metagraph_follows_every_change_of_state(tmp_path):
    state = ChainState(tmp_path / "chain.sqlite")
    netuid = state.genesis.netuid

    def register(hotkey: str) -> None:
        state.apply(hotkey, state.next_nonce(hotkey), "burned_register", {"netuid": netuid, "hotkey": hotkey})

    register("hot-0")
    assert reads.metagraph_record(state, state.head())["hotkeys"] == ["hot-0"]
    register("hot-1")  # in the same block
    assert reads.metagraph_record(state, state.head())["hotkeys"] == ["hot-0", "hot-1"]
    state.apply(
        "hot-1",
        state.next_nonce("hot-1"),
        "serve_axon",
        {"netuid": netuid, "ip": 2130706433, "port": 8091, "ip_type": 4, "version": 1, "protocol": 4},
    )
    head = state.head()
    assert reads.metagraph_record(state, head)["axons"][1]["port"] == 8091
    block = state.produce_block()
    record = reads.metagraph_record(state, block)
    assert (record["block"], record["blocks_since_last_step"]) == (head + 1, head + 1 - record["last_step"])
    state.close()


def test_a_snapshot_rebuilds_changed_neurons_and_reuses_the_rest():
    def neuron(uid, last_update, axon):
        return SimpleNamespace(
            uid=uid,
            hotkey=f"hot-{uid}",
            coldkey="cold",
            total_stake=SimpleNamespace(rao=2_000_000_000),
            validator_permit=uid == 0,
            axon=axon,
            incentive=0.5,
            dividends=0.0,
            emission=SimpleNamespace(rao=0),
            trust=0.0,
            consensus=0.5,
            last_update=last_update,
            block_at_registration=1,
        )

    build = SnapshotBuilder()
    first = build(SimpleNamespace(netuid=1, block=10, neurons=[neuron(0, 5, None), neuron(1, 0, "10.0.0.1:8091")]))
    second = build(SimpleNamespace(netuid=1, block=11, neurons=[neuron(0, 11, None), neuron(1, 0, "[::1]:8092")]))
    assert (second.block, second.by_uid(0).last_update, second.by_uid(0).stake) == (11, 11, 2.0)
    assert (second.by_uid(1).axon.host, second.by_uid(1).axon.port) == ("::1", 8092)
    third = build(SimpleNamespace(netuid=1, block=12, neurons=[neuron(0, 11, None), neuron(1, 0, "[::1]:8092")]))
    assert third.neurons == second.neurons and first.by_uid(1).axon.host == "10.0.0.1"


def test_one_node_per_state_file_and_many_readers_at_once(node):
    second = node_process(node)
    with pytest.raises(RuntimeError, match="already running"):
        wait_listening(second)
    code = (
        "import asyncio, sys; sys.path.insert(0, 'tests'); from support.chain import chain_for; "
        "c = chain_for(sys.argv[1], '//R'); print(asyncio.run(c.metagraph()).netuid)"
    )
    readers = [
        subprocess.Popen([sys.executable, "-c", code, str(node)], stdout=subprocess.PIPE, text=True) for _ in range(4)
    ]
    assert [r.communicate(timeout=60)[0].strip() for r in readers] == ["1"] * 4


class _MovingHead:
    """A client whose pinned reads are discarded ``races`` times (the head moved on) before one lands."""

    def __init__(self, races: int) -> None:
        self.races, self.calls = races, 0

    async def block(self) -> int:
        from bittensor.result import ChainError as SdkChainError

        self.calls += 1
        if self.calls <= self.races:
            raise SdkChainError(
                f"state at block {self.calls} is discarded: the embedded chain keeps the head state only"
            )
        return 100

    async def connect(self) -> None:
        pass


async def test_a_read_raced_by_the_head_is_read_again_even_without_retries():
    from chain.sdk import _REREADS, SdkChain

    raced = SdkChain(_MovingHead(races=3), None, 1, retries=0)
    assert await raced.block() == 100
    stuck = SdkChain(_MovingHead(races=10**6), None, 1, retries=0, backoff_s=0)
    with pytest.raises(ChainError, match="discarded") as caught:
        await stuck.block()
    assert caught.value.transient and stuck.client.calls == _REREADS + 1
