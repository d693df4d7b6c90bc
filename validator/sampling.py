"""Which task a validator sends at a block, and to which miners (docs/validator.md).

Everything here is a pure function of its inputs, so any observer who knows a
validator's hotkey, the block and the active task list can recompute the choice.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

from protocol.metagraph import MetagraphSnapshot, Neuron
from protocol.synapse import Constraints
from protocol.task import Task

SYNTHETIC_RATE = 0.175
SYNTHETIC_TIGHTEN = 0.8
"""A synthetic variant keeps this fraction of the original budget and latency."""

_FRACTION_BYTES = 8


def step_digest(hotkey: str, block: int) -> bytes:
    """``sha256(f"{hotkey}:{block}")``: the one source of every per-step choice."""
    return hashlib.sha256(f"{hotkey}:{block}".encode()).digest()


def pick_task(hotkey: str, block: int, tasks: Sequence[Task]) -> Task:
    """``tasks[sha256(f"{hotkey}:{block}") mod len(tasks)]``, the digest read big-endian."""
    if not tasks:
        raise ValueError("no active tasks to pick from")
    return tasks[int.from_bytes(step_digest(hotkey, block), "big") % len(tasks)]


def is_synthetic(hotkey: str, block: int, rate: float = SYNTHETIC_RATE) -> bool:
    """Whether this step sends a synthetic variant: the digest's first 8 bytes,
    read as a fraction of 2**64, fall below ``rate``."""
    fraction = int.from_bytes(step_digest(hotkey, block)[:_FRACTION_BYTES], "big") / 2 ** (8 * _FRACTION_BYTES)
    return fraction < rate


def synthetic_variant(task: Task, rng_seed: int) -> Task:
    """A fresh-looking copy of ``task`` that a miner cannot look up by id.

    The id becomes ``syn_<8 hex>`` (derived from the original id and the seed,
    so it is stable for a step yet opaque), budget and latency are tightened by
    :data:`SYNTHETIC_TIGHTEN`; the reference, and so the scoring, is unchanged.
    """
    tag = hashlib.sha256(f"{task.task_id}:{rng_seed}".encode()).hexdigest()[:8]
    limits = task.constraints
    constraints = Constraints(
        max_budget_tao=None if limits.max_budget_tao is None else limits.max_budget_tao * SYNTHETIC_TIGHTEN,
        max_latency_seconds=limits.max_latency_seconds * SYNTHETIC_TIGHTEN,
        allowed_subnets=limits.allowed_subnets,
    )
    return task.model_copy(update={"task_id": f"syn_{tag}", "constraints": constraints}, deep=True)


def task_for_step(hotkey: str, block: int, tasks: Sequence[Task], *, synthetic_rate: float = SYNTHETIC_RATE) -> Task:
    """:func:`pick_task`, replaced by its :func:`synthetic_variant` at ``synthetic_rate``."""
    task = pick_task(hotkey, block, tasks)
    if not is_synthetic(hotkey, block, synthetic_rate):
        return task
    return synthetic_variant(task, int.from_bytes(step_digest(hotkey, block), "big"))


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
