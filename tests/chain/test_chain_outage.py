"""An unreachable chain: one-shot calls name the endpoint and the cause; long-running
processes back off and warn once a minute (chain.network.OutageWarner)."""

from __future__ import annotations

import logging

import bittensor as bt
import pytest

from chain.base import Hyperparameters
from chain.network import ChainUnreachable, Network, OutageWarner
from chain.sdk import SdkChain
from miner.metagraph import StaticMetagraph
from neurons.follow import MAX_BACKOFF_S, MetagraphFollower, next_pause
from protocol.metagraph import MetagraphSnapshot


async def test_a_closed_port_is_unreachable_with_endpoint_and_cause():
    chain = SdkChain.open(Network("ws://127.0.0.1:1"), None, 1, retries=0)
    with pytest.raises(ChainUnreachable) as caught:
        await chain.block()
    await chain.close()
    error = caught.value
    assert error.transient and error.endpoint == "ws://127.0.0.1:1"
    assert str(error).startswith("read the block: cannot reach the chain at ws://127.0.0.1:1: ")
    assert "Connect call failed" in error.cause and "connection is not open" not in str(error)


def test_a_named_network_is_shown_with_its_url():
    chain = SdkChain(bt.Client("local"), None, 1)
    error = chain._unreachable(ConnectionRefusedError(111, "Connection refused"), "read the block")
    assert error.endpoint == "local (ws://127.0.0.1:9944)" and "Connection refused" in error.cause


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_warner_says_it_once_a_minute_and_once_when_it_is_back(caplog):
    clock, log = _Clock(), logging.getLogger("test.outage")
    warner = OutageWarner(log, clock=clock)
    error = ChainUnreachable("ws://x:1", "refused")
    with caplog.at_level(logging.INFO, logger="test.outage"):
        for second in range(0, 150):  # a failure a second for 150 s
            clock.now = float(second)
            warner.failed(error, "not synced")
        assert warner.down
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 3  # at 0, 60 and 120 s
        assert all("cannot reach the chain at ws://x:1: refused" in w for w in warnings)
        assert "down 60 s, 59 more failures not logged" in warnings[1]
        warner.recovered()
        warner.recovered()
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert infos == ["chain reachable again after 149 s"] and not warner.down


def test_the_follower_backs_off_while_the_chain_is_down():
    pauses, pause = [], 1.0
    for _ in range(8):
        pause = next_pause(pause, 1.0, answered=False)
        pauses.append(pause)
    assert pauses == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0, 30.0] and MAX_BACKOFF_S == 30.0
    assert next_pause(30.0, 1.0, answered=True) == 1.0


class _Down:
    netuid, hotkey = 1, "me"

    async def block(self) -> int:
        raise ChainUnreachable("ws://127.0.0.1:1", "refused", what="read the block")


class _Up(_Down):
    async def block(self) -> int:
        return 10

    async def metagraph(self, block=None) -> MetagraphSnapshot:
        return MetagraphSnapshot(netuid=1, block=10, neurons=())

    async def hyperparameters(self) -> Hyperparameters:
        return Hyperparameters(
            tempo=10,
            weights_rate_limit=1,
            immunity_period=0,
            max_weight_limit=1.0,
            min_allowed_weights=0,
            commit_reveal_enabled=False,
        )


async def test_the_follower_warns_once_for_many_failed_polls_then_recovers(caplog):
    follower = MetagraphFollower(lambda: None, StaticMetagraph(None), axon=None)
    with caplog.at_level(logging.INFO, logger="dagnet.miner.chain"):
        answered = [await follower.step(_Down()) for _ in range(20)]
        assert await follower.step(_Up())
    assert answered == [False] * 20
    messages = [r.getMessage() for r in caplog.records]
    assert len([m for m in messages if "cannot reach the chain at ws://127.0.0.1:1" in m]) == 1
    assert any(m.startswith("chain reachable again") for m in messages)


async def test_a_validator_without_its_chain_backs_off_and_warns_once(tmp_path, caplog):
    """The validator's loop names the endpoint and the cause once, not a line per poll, and
    waits longer between looks at a head that does not answer."""
    import asyncio

    from support.health import validator_loop
    from support.keys import MetagraphBuilder
    from validator.loop import LoopConfig

    snapshot = MetagraphBuilder(netuid=1).build()
    async with validator_loop(tmp_path, snapshot) as (loop, chain, metrics):
        loop.config = LoopConfig(poll_s=0.01)
        looks: list[float] = []

        async def unreachable() -> int:
            looks.append(asyncio.get_running_loop().time())
            if len(looks) >= 7:
                stop.set()
            raise ChainUnreachable("ws://127.0.0.1:1", "[Errno 111] Connect call failed", what="read the block")

        chain.block = unreachable
        stop = asyncio.Event()
        with caplog.at_level(logging.WARNING, logger="validator.loop"):
            assert await loop._next_block(stop) is None
    warnings = [r.getMessage() for r in caplog.records if "cannot reach" in r.getMessage()]
    assert len(warnings) == 1 and "ws://127.0.0.1:1" in warnings[0] and "Connect call failed" in warnings[0]
    gaps = [b - a for a, b in zip(looks, looks[1:])]
    assert gaps[-1] > 4 * gaps[0], gaps


def test_an_embedded_chain_is_named_by_its_state_file(tmp_path):
    chain = SdkChain.open(Network("embedded", tmp_path / "dev.sqlite"), None, 1)
    error = chain._unreachable(ConnectionRefusedError(111, "Connection refused"), "read the block")
    assert error.endpoint == chain.where == f"embedded:{tmp_path / 'dev.sqlite'}"
    assert "127.0.0.1:9944" not in str(error)


async def test_the_retries_of_an_unreachable_chain_are_not_warnings(caplog):
    """The process reports the outage (OutageWarner: once a minute), not each retry."""
    chain = SdkChain.open(Network("ws://127.0.0.1:1"), None, 1, retries=3, backoff_s=0.01)
    with caplog.at_level(logging.DEBUG, logger="dagnet.chain"), pytest.raises(ChainUnreachable):
        await chain.block()
    await chain.close()
    retries = [r for r in caplog.records if "retrying" in r.getMessage()]
    assert len(retries) == 3 and {r.levelno for r in retries} == {logging.DEBUG}
