"""Setting weights: when they are due, what they are, and the chain's answer recorded.

Weights are due when ``max(tempo, weights_rate_limit)`` blocks have passed since the
last accepted set. They come from the miners' window means over the reference
(:func:`scoring.margin.margin_weights`): the miners on the metagraph, each window
counting only for the hotkey that earned it, its mean score and mean margin scaled while
the miner warms up; of each group of copies and variants only its first-committed
member is paid (:func:`scoring.margin.leaders`). When nobody beats the reference, the part above the
floor burns to the subnet owner's uid when the owner's hotkey is registered on the
subnet, else the floor group takes it all. The loop asks on a task of its own
(:meth:`validator.loop.ValidatorLoop.run`), so a step held by slow miners delays no
weight-set. Sending the weights and recording what the chain accepted are one unit
(:func:`to_the_end`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from chain.base import Hyperparameters
from scoring.margin import MarginWeights, Means, Payout, leaders, margin_weights
from scoring.weights import warmup_scale

from .answers import first_commit_order
from .chainview import ChainView
from .prometheus import ValidatorMetrics
from .state import ValidatorState

log = logging.getLogger(__name__)
T = TypeVar("T")


class WeightSetter:
    def __init__(
        self,
        view: ChainView,
        state: ValidatorState,
        metrics: ValidatorMetrics,
        *,
        version_key: int,
        warmup_full_at: int,
    ) -> None:
        self.view = view
        self.state = state
        self.metrics = metrics
        self.version_key = version_key
        self.warmup_full_at = warmup_full_at
        self.last_payout: Paid | None = None
        """The last weight-set the chain accepted in this process (:meth:`ValidatorState.last_payout` survives restarts)."""
        kept = state.last_payout()
        if kept is not None:  # /metrics says where the emission goes from the start, not from the next set
            metrics.paid(kept.payout)

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
        owner = await self.view.owner_hotkey()
        paid = self.payout(block, hyper.immunity_period, burn_uid=self._uid_of(owner))
        if not paid.weights:
            log.info("no miner has a positive score yet and the owner's hotkey is not registered: no weights to set")
            self.metrics.weights_set.labels("nothing_to_set").inc()
            return False
        return await to_the_end(self._submit(block, paid))

    async def _submit(self, block: int, paid: Paid) -> bool:
        """Send ``paid``'s weights to the chain and record what it accepted: one unit, run to
        its end by :func:`to_the_end` even when the validator is stopped meanwhile."""
        tick = time.perf_counter()
        weights = paid.weights
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
        self.state.weights_accepted(accepted, weights, paid.payout, burn_uid=paid.burn_uid)
        self.last_payout = paid
        self.metrics.weights_set.labels("success").inc()
        self.metrics.last_weights_block.set(accepted)
        self.metrics.weights(weights)
        self.metrics.paid(paid.payout)
        log.info("weights set at block %s for %d miners: %s", accepted, len(weights), describe(paid))
        return True

    def weights(self, block: int, immunity_period: int, *, burn_uid: int | None = None) -> dict[int, float]:
        """The weights of :meth:`payout`."""
        return self.payout(block, immunity_period, burn_uid=burn_uid).weights

    def payout(self, block: int, immunity_period: int, *, burn_uid: int | None = None) -> Paid:
        """Weights from the window means of the miners on the metagraph last read
        (:func:`scoring.margin.margin_weights`), burning to ``burn_uid`` when nobody
        beats the reference.

        A window counts only for the hotkey that earned it; a miner still in immunity
        has its mean score and mean margin scaled by ``min(1, tasks_seen / warmup_full_at)``.
        """
        means = self.means(block, immunity_period)
        led = self.leaders(means)
        paid = margin_weights({uid: m for uid, m in means.items() if led.get(uid, uid) == uid}, burn_uid=burn_uid)
        return Paid(paid.weights, paid.payout, means, burn_uid if paid.payout is Payout.BURN else None, led)

    def leaders(self, means: Mapping[int, Means]) -> dict[int, int]:
        """Each counted uid's group leader (:func:`scoring.margin.leaders`) over its window
        of answers, in first-commit order: first seen sending an answer another uid also
        sent, then earliest registration (:mod:`validator.answers`)."""
        snapshot = self.view.snapshot
        kept, claimed = self.state.answer_windows()
        hotkeys = {} if snapshot is None else {n.uid: n.hotkey for n in snapshot.neurons}
        counted = {
            uid: entries for uid, (hotkey, entries) in kept.items() if uid in means and hotkeys.get(uid) == hotkey
        }
        registered = {} if snapshot is None else {n.uid: n.registered_block for n in snapshot.neurons}
        order = first_commit_order({uid: claimed[uid] for uid in counted}, registered)
        return leaders(counted, order)

    def means(self, block: int, immunity_period: int) -> dict[int, Means]:
        """The window means that count, warm-up scaled, of the miners on the metagraph last read."""
        snapshot = self.view.snapshot
        if snapshot is None:
            return {}
        standing = self.state.standing()  # one read: a step settling meanwhile is in it whole or not at all
        stored = standing.means()
        means = {}
        for neuron in snapshot.neurons:
            if standing.hotkeys.get(neuron.uid) != neuron.hotkey or neuron.uid not in stored:
                continue
            registered = neuron.registered_block
            in_immunity = registered is not None and block - registered < immunity_period
            scale = warmup_scale(standing.tasks_seen.get(neuron.uid, 0), in_immunity, self.warmup_full_at)
            means[neuron.uid] = stored[neuron.uid].scaled(scale)
        return means

    def _uid_of(self, hotkey: str | None) -> int | None:
        """``hotkey``'s uid on the metagraph last read, when it is registered there."""
        snapshot = self.view.snapshot
        neuron = None if hotkey is None or snapshot is None else snapshot.by_hotkey(hotkey)
        return None if neuron is None else neuron.uid


@dataclass(frozen=True, slots=True)
class Paid(MarginWeights):
    """One weight-set: the weights, where they sent the emission, the means they came
    from and the uid that took the burned part (when :attr:`payout` is ``burn``)."""

    means: dict[int, Means] = field(default_factory=dict)
    burn_uid: int | None = None
    leaders: dict[int, int] = field(default_factory=dict)
    """Each uid's group leader; a uid led by another is a later copy, paid nothing."""


def describe(paid: Paid) -> str:
    """Where ``paid`` sends the emission, in one line for the log."""
    floor = {
        uid: w for uid, w in paid.weights.items() if uid != paid.burn_uid and not paid.means.get(uid, _NONE).clear > 0
    }
    copies = sum(leader != uid for uid, leader in paid.leaders.items())
    floor_part = f"floor {100 * math.fsum(floor.values()):.0f} % to {len(floor)} miners" if floor else "no floor"
    floor_part += f", {copies} later copies paid nothing" if copies else ""
    if paid.payout is Payout.MARGIN:
        beaters = [paid.means[uid].margin for uid in paid.weights if uid not in floor]
        return f"{len(beaters)} beat the reference (best {max(beaters):+.3f}), {floor_part}"
    if paid.payout is Payout.BURN:
        burned = paid.weights.get(paid.burn_uid, 0.0) if paid.burn_uid is not None else 0.0
        return (
            f"nobody beat the reference: {100 * burned:.0f} % burned to the owner's uid {paid.burn_uid}, {floor_part}"
            + _closest(paid)
        )
    return f"nobody beat the reference and the owner's hotkey is not on the subnet: {floor_part} (all of it)" + (
        _closest(paid)
    )


def _closest(paid: Paid) -> str:
    """The leader nearest to being a beater, its margin and the bar it must exceed (its
    error counted in worlds times the bar for that many, :mod:`scoring.worlds`): why
    nobody is paid for a margin, for an operator reading the log."""
    led = [uid for uid in sorted(paid.means) if paid.leaders.get(uid, uid) == uid and uid != paid.burn_uid]
    if not led:
        return ""
    uid = max(led, key=lambda u: (paid.means[u].clear, paid.means[u].margin))
    means = paid.means[uid]
    against = f"a bar of {means.bar:.3f}" if math.isfinite(means.bar) else "no bar yet (fewer than two worlds)"
    return f"; closest: uid {uid}, margin {means.margin:+.3f} against {against}"


_NONE = Means(0.0, 0.0)


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
