"""An in-memory :class:`chain.base.Chain` for validator tests.

The test moves the chain: :meth:`FakeChain.advance` adds blocks, ``down = True``
makes every call fail as a lost connection would. ``set_weights`` enforces the
weights rate limit the way the chain does (a refusal with its reason) and keeps
every accepted set in :attr:`FakeChain.weights_log`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from chain.base import ChainError, Hyperparameters, WeightsResult
from protocol.metagraph import MetagraphSnapshot


@dataclass
class FakeChain:
    hotkey: str
    snapshot: MetagraphSnapshot
    hyper: Hyperparameters = field(
        default_factory=lambda: Hyperparameters(
            tempo=10,
            weights_rate_limit=5,
            immunity_period=0,
            max_weight_limit=1.0,
            min_allowed_weights=0,
            commit_reveal_enabled=False,
        )
    )
    head: int = 100
    down: bool = False
    netuid: int = 7
    owner: str | None = None
    """The subnet owner's hotkey (``None``: a subnet without one)."""
    weights_log: list[tuple[int, dict[int, float], int]] = field(default_factory=list)
    refusals: list[tuple[int, str]] = field(default_factory=list)
    _last_set: int | None = None

    def advance(self, blocks: int = 1) -> int:
        self.head += blocks
        return self.head

    def _check(self) -> None:
        if self.down:
            raise ChainError("connection refused", transient=True)

    async def block(self) -> int:
        self._check()
        return self.head

    async def metagraph(self, block: int | None = None) -> MetagraphSnapshot:
        self._check()
        return MetagraphSnapshot(self.snapshot.netuid, self.head, self.snapshot.neurons)

    async def hyperparameters(self) -> Hyperparameters:
        self._check()
        return self.hyper

    async def blocks_until_epoch(self) -> int:
        self._check()
        return self.hyper.tempo - self.head % self.hyper.tempo

    async def owner_hotkey(self) -> str | None:
        self._check()
        return self.owner

    async def serve_axon(self, host: str, port: int) -> None:
        self._check()

    async def set_weights(self, uids: Sequence[int], weights: Sequence[float], version_key: int) -> WeightsResult:
        self._check()
        if self._last_set is not None and self.head - self._last_set < self.hyper.weights_rate_limit:
            reason = f"SettingWeightsTooFast: last set at {self._last_set}, now {self.head}"
            self.refusals.append((self.head, reason))
            return WeightsResult(False, reason)
        self._last_set = self.head
        total = sum(weights)
        self.weights_log.append((self.head, {u: w / total for u, w in zip(uids, weights)}, version_key))
        return WeightsResult(True, "ok", self.head)

    async def register(self) -> int:
        raise ChainError("not supported by the fake chain")

    async def stake(self, amount_tao: float) -> None:
        raise ChainError("not supported by the fake chain")

    async def close(self) -> None:
        return None
