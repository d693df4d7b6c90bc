"""Setting weights: when they are due, what they are, and the chain's answer recorded.

Weights are due when ``max(tempo, weights_rate_limit)`` blocks have passed since the
last accepted set. They are the windowed means of the miners on the metagraph, each
counting only for the hotkey that earned it and scaled while the miner warms up. The
loop asks on a task of its own (:meth:`validator.loop.ValidatorLoop.run`), so a step
held by slow miners delays no weight-set. Sending the weights and recording what the
chain accepted are one unit (:func:`to_the_end`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from typing import TypeVar

from chain.base import Hyperparameters
from scoring.weights import normalize_weights, warmup_scale

from .chainview import ChainView
from .prometheus import ValidatorMetrics
from .state import ValidatorState

log = logging.getLogger(__name__)
T = TypeVar("T")


class WeightSetter:
    def __init__(
        self, view: ChainView, state: ValidatorState, metrics: ValidatorMetrics, *, version_key: int,
        warmup_full_at: int,
    ) -> None:
        self.view = view
        self.state = state
        self.metrics = metrics
        self.version_key = version_key
        self.warmup_full_at = warmup_full_at

    async def maybe_set(self, block: int) -> bool:
        """Set weights if a tempo (and the rate limit) has passed since the last accepted set."""
        hyper = await self.view.read_hyperparameters()
        if hyper is None:
            return False
        last = self.state.last_weights_block()
        if last is not None and block - last < max(hyper.tempo, hyper.weights_rate_limit):
            return False
        return await self.set(block, hyper)

    async def set(self, block: int, hyper: Hyperparameters) -> bool:
        weights = self.weights(block, hyper.immunity_period)
        if not weights:
            log.info("no miner has a positive score yet: no weights to set")
            self.metrics.weights_set.labels("nothing_to_set").inc()
            return False
        return await to_the_end(self._submit(block, weights))

    async def _submit(self, block: int, weights: dict[int, float]) -> bool:
        """Send ``weights`` to the chain and record what it accepted: one unit, run to its
        end by :func:`to_the_end` even when the validator is stopped meanwhile."""
        tick = time.perf_counter()
        uids = sorted(weights)
        try:
            result = await self.view.chain.set_weights(uids, [weights[uid] for uid in uids], self.version_key)
        except Exception as exc:
            self.view.error("set_weights", exc)
            self.metrics.weights_set.labels("error").inc()
            return False
        self.metrics.phase.labels("weights").observe(time.perf_counter() - tick)
        if not result.success:
            log.warning("set_weights refused at block %s: %s", block, result.message)
            self.metrics.weights_set.labels("refused").inc()
            return False
        accepted = result.block if result.block is not None else block
        self.state.weights_accepted(accepted, weights)
        self.metrics.weights_set.labels("success").inc()
        self.metrics.last_weights_block.set(accepted)
        self.metrics.weights(weights)
        log.info("weights set at block %s for %d miners", accepted, len(weights))
        return True

    def weights(self, block: int, immunity_period: int) -> dict[int, float]:
        """Weights from the windowed means of the miners on the metagraph last read.

        A window counts only for the hotkey that earned it; a miner still in
        immunity is scaled by ``min(1, tasks_seen / warmup_full_at)``.
        """
        snapshot = self.view.snapshot
        if snapshot is None:
            return {}
        standing = self.state.standing()  # one read: a step settling meanwhile is in it whole or not at all
        scores = {}
        for neuron in snapshot.neurons:
            if standing.hotkeys.get(neuron.uid) != neuron.hotkey:
                continue
            registered = neuron.registered_block
            in_immunity = registered is not None and block - registered < immunity_period
            scale = warmup_scale(standing.tasks_seen.get(neuron.uid, 0), in_immunity, self.warmup_full_at)
            scores[neuron.uid] = standing.window.mean(neuron.uid) * scale
        return normalize_weights(scores)


async def to_the_end(unit: Awaitable[T]) -> T:
    """``unit``'s result, awaited to its end even when the caller is cancelled meanwhile
    (the cancellation is raised after it): the validator never stops between two
    things that must happen together, such as setting weights and recording them."""
    task = asyncio.ensure_future(unit)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                raise
            cancelled = True
        else:
            break
    if cancelled:
        raise asyncio.CancelledError
    return result
