"""What a neuron needs of a chain, whichever chain it is.

``neurons/`` and ``validator/`` talk to a :class:`Chain`; ``chain/`` holds its one
implementation on bittensor 11 (which runs unchanged on a live node or on the
embedded development chain, through the SDK's ``bittensor.Substrate`` seam).
Everything is async because the SDK is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from protocol.metagraph import MetagraphSnapshot


def blocks_until_epoch(block: int, netuid: int, tempo: int) -> int:
    """Subtensor's schedule: subnet ``netuid``'s epoch runs at the block where this is 0."""
    return tempo - (block + netuid + 1) % (tempo + 1) if tempo else 0


class ChainError(Exception):
    """A chain call failed; the message is the chain's (or the SDK's) own.

    ``transient`` is true for failures worth retrying later (connection lost,
    rate limited by the RPC endpoint); false for a refusal by the chain itself.
    """

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


@dataclass(frozen=True, slots=True)
class Hyperparameters:
    """The subnet parameters a validator must respect when it sets weights."""

    tempo: int
    weights_rate_limit: int
    immunity_period: int
    max_weight_limit: float
    """The largest share one uid may get, in [0, 1]."""
    min_allowed_weights: int
    commit_reveal_enabled: bool
    weights_version: int = 0
    """The least ``version_key`` the chain accepts weights with (``WeightsVersionKey``)."""


@dataclass(frozen=True, slots=True)
class WeightsResult:
    """What the chain said to a ``set_weights``: accepted, or refused with its reason."""

    success: bool
    message: str
    block: int | None = None


class Chain(Protocol):
    """One subnet on one chain, seen from one wallet (its hotkey signs)."""

    netuid: int
    hotkey: str

    async def block(self) -> int: ...

    async def metagraph(self, block: int | None = None) -> MetagraphSnapshot:
        """The metagraph read at ``block`` (default: the head), all fields from one block."""
        ...

    async def hyperparameters(self) -> Hyperparameters: ...

    async def blocks_until_epoch(self) -> int: ...

    async def owner_hotkey(self) -> str | None:
        """The subnet owner's hotkey (``SubnetOwnerHotkey``), or ``None`` when it has none
        (a subnet made at genesis); a validator burns to its uid (docs/scoring.md)."""
        ...

    async def serve_axon(self, host: str, port: int) -> None: ...

    async def set_weights(self, uids: Sequence[int], weights: Sequence[float], version_key: int) -> WeightsResult:
        """Normalised on the way out; a refusal is a result, not an exception."""
        ...

    async def register(self) -> int:
        """Register this hotkey on the subnet (development networks); returns its uid."""
        ...

    async def stake(self, amount_tao: float) -> None:
        """Add stake to this hotkey from its coldkey (development networks)."""
        ...

    async def close(self) -> None: ...
