"""Which task a validator sends at a block, and to which miners (docs/validator.md).

A step's **task draw** (:func:`draw_task`) is the one definition of what a step
sends: which task (family), the seed of its hidden instance, whether it goes out
as a synthetic variant, the hint tier it is sent at (:func:`step_tier`: a curated family
at ``full`` only, a drawn one at one tier per tempo), and the tempo whose drawn
families it came from (``None`` for a curated one). The loop sends what it draws and
the state stores the draw, so an audit rebuilds the same task from the record
(:meth:`TaskDraw.task`). Everything here is a pure function of its inputs: any
observer who knows a validator's hotkey, the block and the task list can recompute
the task and whether it is synthetic; the instance seed and the tier also need the
validator's secret.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from protocol.hints import TIER_SHARES, TIERS, HintTier
from protocol.metagraph import MetagraphSnapshot, Neuron
from protocol.task import Task, at_tier, synthetic_variant

SYNTHETIC_RATE = 0.175

DEFAULT_TIER_SHARES: dict[HintTier, float] = dict(TIER_SHARES)
"""The tiers a validator sends at by default: :data:`protocol.hints.TIER_SHARES`
(0.2 ``full``, 0.3 ``outline``, 0.5 ``goal``)."""

_FRACTION_BYTES = 8


def step_digest(hotkey: str, block: int) -> bytes:
    """``sha256(f"{hotkey}:{block}")``: the one source of every public per-step choice."""
    return hashlib.sha256(f"{hotkey}:{block}".encode()).digest()


def pick_task(hotkey: str, block: int, tasks: Sequence[Task]) -> Task:
    """``tasks[sha256(f"{hotkey}:{block}") mod len(tasks)]``, the digest read big-endian."""
    if not tasks:
        raise ValueError("no active tasks to pick from")
    return tasks[int.from_bytes(step_digest(hotkey, block), "big") % len(tasks)]


def is_synthetic(hotkey: str, block: int, rate: float = SYNTHETIC_RATE) -> bool:
    """Whether this step sends a synthetic variant: the digest's first 8 bytes,
    read as a fraction of 2**64, fall below ``rate``."""
    return _fraction(step_digest(hotkey, block)) < rate


def _fraction(digest: bytes) -> float:
    """The digest's first 8 bytes, read big-endian, as a fraction of 2**64."""
    return int.from_bytes(digest[:_FRACTION_BYTES], "big") / 2 ** (8 * _FRACTION_BYTES)


def instance_seed(secret: int, block: int, task_id: str) -> int:
    """The seed of the instance a validator sends at ``block``: 63 bits of
    ``sha256(f"{secret}:{block}:{task_id}")``, unguessable without the secret."""
    digest = hashlib.sha256(f"{secret}:{block}:{task_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def tier_shares_problem(shares: Mapping[str, float]) -> str | None:
    """Why ``shares`` cannot be a validator's tier shares, or ``None`` when they can:
    known tiers only, each share finite and non-negative, summing to 1 within 1e-9."""
    unknown = sorted(set(shares) - set(TIERS))
    if unknown:
        return f"unknown hint tier {unknown[0]!r}; known: {', '.join(TIERS)}"
    bad = sorted(tier for tier, share in shares.items() if not math.isfinite(share) or share < 0)
    if bad:
        return f"the share of {bad[0]!r} is {shares[bad[0]]}, not a non-negative number"
    total = math.fsum(shares.values())
    if abs(total - 1.0) > 1e-9:
        return f"the shares sum to {total}, not 1"
    return None


def draw_tier(
    secret: int, block: int, task_id: str, shares: Mapping[HintTier, float] = DEFAULT_TIER_SHARES
) -> HintTier:
    """The hint tier of the step at ``block``: ``sha256(f"{secret}:{block}:{task_id}:tier")``'s
    first 8 bytes as a fraction of 2**64, against the shares' running sum in
    :data:`~protocol.hints.TIERS` order (the first tier whose running sum exceeds it)."""
    fraction = _fraction(hashlib.sha256(f"{secret}:{block}:{task_id}:tier".encode()).digest())
    cumulative, last = 0.0, None
    for tier in TIERS:
        share = shares.get(tier, 0.0)
        if share <= 0:
            continue
        cumulative += share
        last = tier
        if fraction < cumulative:
            return tier
    if last is None:
        raise ValueError("no hint tier has a positive share")
    return last  # a sum a hair under 1 leaves the top of the range to the last tier


@dataclass(frozen=True, slots=True)
class TaskDraw:
    """One step's task: the ``base`` task as listed, the ``seed`` of its hidden
    instance, whether it is sent as its synthetic variant, the hint ``tier`` it is sent
    at, and ``drawn_tempo``: the tempo whose drawn families ``base`` is one of
    (``None``: a curated family)."""

    base: Task
    seed: int
    synthetic: bool
    tier: HintTier = "full"
    drawn_tempo: int | None = None

    def task(self, instance: Callable[[Task, int], Task]) -> Task:
        """The task sent and scored: ``instance(base, seed)`` (a task source's draw of
        the hidden instance) at the draw's tier, under its synthetic variant when the
        draw says so."""
        task = at_tier(instance(self.base, self.seed), self.tier)
        return synthetic_variant(task, self.seed) if self.synthetic else task


def step_tier(
    secret: int,
    block: int,
    task_id: str,
    drawn: Mapping[str, int | None],
    shares: Mapping[HintTier, float] = DEFAULT_TIER_SHARES,
) -> HintTier:
    """The tier a step sends ``task_id`` at. A curated family (not in ``drawn``) goes out at
    ``full`` only: its description is the same on every step, so at a lower tier a miner
    that kept its full hints from an earlier step would look them up. A drawn family gets
    one tier for its whole tempo, :func:`draw_tier` with the tempo in place of the block
    (the block when the tempo is unknown), so a family sent at ``outline`` or ``goal`` is
    never sent with its full hints."""
    if task_id not in drawn:
        return "full"
    tempo = drawn[task_id]
    return draw_tier(secret, block if tempo is None else tempo, task_id, shares)


def draw_task(
    hotkey: str,
    secret: int,
    block: int,
    tasks: Sequence[Task],
    *,
    synthetic_rate: float = SYNTHETIC_RATE,
    tier_shares: Mapping[HintTier, float] = DEFAULT_TIER_SHARES,
    drawn: Mapping[str, int | None] | None = None,
) -> TaskDraw:
    """The draw of the step at ``block``: :func:`pick_task`, :func:`instance_seed`,
    :func:`is_synthetic`, :func:`step_tier`. ``drawn`` maps the ids of the drawn
    families among ``tasks`` to the tempo they were drawn for."""
    base, drawn = pick_task(hotkey, block, tasks), drawn or {}
    return TaskDraw(
        base,
        instance_seed(secret, block, base.task_id),
        is_synthetic(hotkey, block, synthetic_rate),
        step_tier(secret, block, base.task_id, drawn, tier_shares),
        drawn.get(base.task_id),
    )


def serving_miners(snapshot: MetagraphSnapshot, *, self_hotkey: str | None = None) -> list[Neuron]:
    """Neurons with an axon, other than the caller, by uid."""
    return sorted(
        (n for n in snapshot.neurons if n.axon is not None and n.hotkey != self_hotkey),
        key=lambda n: n.uid,
    )


def sample_miners(snapshot: MetagraphSnapshot, k: int, seed: int, *, self_hotkey: str | None = None) -> list[Neuron]:
    """A deterministic sample of up to ``k`` serving miners, in uid order.

    The same snapshot, ``k`` and ``seed`` always give the same miners.
    """
    candidates = serving_miners(snapshot, self_hotkey=self_hotkey)
    if k >= len(candidates):
        return candidates
    chosen = random.Random(seed).sample(candidates, max(0, k))
    return sorted(chosen, key=lambda n: n.uid)


class TaskSource(Protocol):
    """The benchmark tasks (families) and how one instance of a task is drawn."""

    def tasks(self) -> Sequence[Task]:
        """Every task the validator knows, by id; the lifecycle decides which are active."""
        ...

    def instance(self, task: Task, seed: int) -> Task:
        """The instance of ``task`` for ``seed``: its inputs and the reference they imply."""
        ...


DrawnFamilies = Callable[[int, int], TaskSource]
"""``(secret, tempo) -> the families drawn for that tempo``, as a task source of their
own: deterministic in its arguments (``tasks.drawn``, wired by ``neurons/``)."""


def tempo_of(block: int, tempo_blocks: int) -> int:
    """The tempo ``block`` falls in, counted from block 0: what drawn families are drawn for."""
    return block // tempo_blocks


def source_of(drawn_tempo: int | None, curated: TaskSource, drawn: DrawnFamilies | None, secret: int) -> TaskSource:
    """The task source a draw's base comes from: ``curated``, or the families drawn for
    ``drawn_tempo``. ``KeyError`` when it is a drawn family and none are configured."""
    if drawn_tempo is None:
        return curated
    if drawn is None:
        raise KeyError(f"a family drawn for tempo {drawn_tempo}, and no drawn families are configured")
    return drawn(secret, drawn_tempo)


class FixedTasks:
    """Tasks without hidden inputs: every instance of a task is the task itself."""

    def __init__(self, tasks: Sequence[Task]) -> None:
        self._tasks = tuple(tasks)

    def tasks(self) -> Sequence[Task]:
        return self._tasks

    def instance(self, task: Task, seed: int) -> Task:
        return task
