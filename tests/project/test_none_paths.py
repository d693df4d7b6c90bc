"""Paths where a ``None`` used to reach a call (found by the type check): each is handled."""

from __future__ import annotations

from typing import Any

import pytest

from chain.base import ChainError
from chain.sdk import SdkChain
from miner.asgi import HOTKEY, STAKE
from miner.blacklist import BlacklistMiddleware
from miner.prometheus import MinerMetrics
from neurons.keys import open_wallet
from protocol.metagraph import MetagraphSnapshot, Neuron


class _Client:
    """A client whose writes must never be reached."""

    async def connect(self) -> None:
        pass

    async def execute(self, intent: Any, wallet: Any) -> Any:
        raise AssertionError(f"the SDK was handed wallet {wallet!r}")

    submit_call = execute


async def test_a_chain_without_a_wallet_refuses_writes_by_name() -> None:
    chain = SdkChain(_Client(), None, 1)
    refused = await chain.set_weights([0], [1.0], 0)
    assert not refused.success and refused.message.startswith("set weights: ") and "without a wallet" in refused.message
    for write, name in ((chain.stake(1.0), "stake"), (chain.serve_axon("127.0.0.1", 1), "serve the axon")):
        with pytest.raises(ChainError, match=f"^{name}: .*without a wallet"):
            await write


def test_no_dev_key_and_no_wallet_name_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="give a dev key or a wallet name"):
        open_wallet(None, None)


class _Swapping:
    """A metagraph source that drops the caller after the blacklist's check has read it."""

    def __init__(self, first: MetagraphSnapshot, then: MetagraphSnapshot) -> None:
        self._snapshots = [first, then]

    def snapshot(self) -> MetagraphSnapshot | None:
        return self._snapshots.pop(0) if len(self._snapshots) > 1 else self._snapshots[0]

    def problem(self) -> str | None:
        return None


async def test_a_caller_gone_from_a_new_snapshot_ranks_last_not_a_crash() -> None:
    caller = Neuron(uid=0, hotkey="5Caller", stake=50.0, validator_permit=True)
    seen: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope[STAKE])

    layer = BlacklistMiddleware(
        app,
        metagraph=_Swapping(MetagraphSnapshot(1, 100, (caller,)), MetagraphSnapshot(1, 101, ())),
        min_stake=0.0,
        require_validator_permit=True,
        metrics=MinerMetrics(),
    )
    await layer({"type": "http", HOTKEY: caller.hotkey}, None, None)
    assert seen == [0.0]
