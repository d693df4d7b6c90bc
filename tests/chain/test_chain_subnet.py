"""A chain that starts with no subnet: ``register_network`` and ``start_call`` through the
SDK's own intents (``RegisterSubnet``, ``StartCall``) on the embedded substrate."""

from __future__ import annotations

import pytest

from chain.base import ChainError
from support.chain import chain_for, running_node, wait_for_block

pytestmark = pytest.mark.e2e

DELAY = 6


@pytest.fixture
def empty_chain(tmp_path):
    state = tmp_path / "chain.sqlite"
    with running_node(state, block_time=0.1, subnet_at_genesis=False, start_call_delay=DELAY):
        yield state


async def test_no_subnet_until_created_then_the_owner_is_uid_0(empty_chain):
    owner = chain_for(empty_chain, "//Owner")
    try:
        with pytest.raises(ChainError, match=f"subnet 1 does not exist on embedded:{empty_chain}"):
            await owner.metagraph()
        with pytest.raises(ChainError, match="does not exist"):
            await owner.register()
        assert await owner.subnet_owners() == {} and await owner.owned_subnets() == []
        assert await owner.owner_hotkey() is None

        assert await owner.create_subnet() == 1
        assert await owner.owned_subnets() == [1]
        assert (await owner.subnet_owners())[1] == owner.wallet.coldkeypub.ss58_address
        snapshot = await owner.metagraph()
        assert [(n.uid, n.hotkey) for n in snapshot.neurons] == [(0, owner.hotkey)]
        assert await owner.owner_hotkey() == owner.hotkey  # what a validator burns to (SubnetOwnerHotkey)
        with pytest.raises(ChainError, match="holds one subnet"):
            await owner.create_subnet()
    finally:
        await owner.close()


async def test_start_call_waits_for_the_delay_and_only_the_owner_may_call_it(empty_chain):
    owner = chain_for(empty_chain, "//Owner")
    stranger = chain_for(empty_chain, "//Stranger", coldkey_uri="//Mallory")
    try:
        await owner.create_subnet()
        created_at = (await owner.metagraph()).neurons[0].registered_block  # the owner joins as the subnet is made
        assert not await owner.started()
        with pytest.raises(ChainError, match="SubToken disabled"):
            await owner.stake(10)  # nothing trades before start_call
        with pytest.raises(ChainError, match="does not own"):
            await stranger.start(timeout_s=30)

        await owner.start(timeout_s=30)
        assert await owner.started() and await owner.block() >= created_at + DELAY
        with pytest.raises(ChainError, match="started already"):
            await owner.start(timeout_s=30)
        await owner.stake(10)
        assert (await owner.metagraph()).neurons[0].stake >= 10
    finally:
        await owner.close()
        await stranger.close()


async def test_an_unstarted_subnet_runs_no_epoch(empty_chain):
    owner = chain_for(empty_chain, "//Owner")
    try:
        await owner.create_subnet()
        await wait_for_block(owner, await owner.block() + 2 * 5 + 2)  # two tempos of the test genesis
        assert (await owner.metagraph()).neurons[0].emission == 0
    finally:
        await owner.close()


async def test_start_gives_up_when_the_delay_outlasts_the_timeout(tmp_path):
    state = tmp_path / "chain.sqlite"
    with running_node(state, block_time=0.1, subnet_at_genesis=False, start_call_delay=100_000):
        owner = chain_for(state, "//Owner")
        try:
            await owner.create_subnet()
            with pytest.raises(ChainError, match="can start at block"):
                await owner.start(timeout_s=0.5)
        finally:
            await owner.close()


def test_a_chain_made_with_its_subnet_has_it_started_and_ownerless(tmp_path):
    import asyncio

    async def check(state) -> None:
        chain = chain_for(state, "//Owner")
        try:
            assert await chain.started() and await chain.subnet_owners() == {1: ""}
        finally:
            await chain.close()

    with running_node(tmp_path / "chain.sqlite"):
        asyncio.run(check(tmp_path / "chain.sqlite"))
