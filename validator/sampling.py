"""Which task a validator sends at a block, and to which miners (docs/validator.md).

A step's **task draw** (:func:`draw_task`) is the one definition of what a step
sends: which task (family), the seed of its hidden instance, and whether it goes out
as a synthetic variant. The loop sends what it draws and the state stores the draw
(``base_task_id``, ``instance_seed``, ``synthetic``), so an audit rebuilds the same
task from the record (:meth:`TaskDraw.task`). Everything here is a pure function of
its inputs: any observer who knows a validator's hotkey, the block and the active
task list can recompute the task and whether it is synthetic; the instance seed
also needs the validator's secret.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from protocol.metagraph import MetagraphSnapshot, Neuron
from protocol.task import Task, synthetic_variant

SYNTHETIC_RATE = 0.175

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
    fraction = int.from_bytes(step_digest(hotkey, block)[:_FRACTION_BYTES], "big") / 2 ** (8 * _FRACTION_BYTES)
    return fraction < rate


def instance_seed(secret: int, block: int, task_id: str) -> int:
    """The seed of the instance a validator sends at ``block``: 63 bits of
    ``sha256(f"{secret}:{block}:{task_id}")``, unguessable without the secret."""
    digest = hashlib.sha256(f"{secret}:{block}:{task_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


@dataclass(frozen=True, slots=True)
class TaskDraw:
    """One step's task: the ``base`` task as listed, the ``seed`` of its hidden
    instance, and whether it is sent as its synthetic variant."""

    base: Task
    seed: int
    synthetic: bool

    def task(self, instance: Callable[[Task, int], Task]) -> Task:
        """The task sent and scored: ``instance(base, seed)`` (a task source's draw of
        the hidden instance), under its synthetic variant when the draw says so."""
        task = instance(self.base, self.seed)
        return synthetic_variant(task, self.seed) if self.synthetic else task


def draw_task(hotkey: str, secret: int, block: int, tasks: Sequence[Task], *,
              synthetic_rate: float = SYNTHETIC_RATE) -> TaskDraw:
    """The draw of the step at ``block``: :func:`pick_task`, :func:`instance_seed`,
    :func:`is_synthetic`."""
    base = pick_task(hotkey, block, tasks)
    return TaskDraw(base, instance_seed(secret, block, base.task_id), is_synthetic(hotkey, block, synthetic_rate))


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


class FixedTasks:
    """Tasks without hidden inputs: every instance of a task is the task itself."""

    def __init__(self, tasks: Sequence[Task]) -> None:
        self._tasks = tuple(tasks)

    def tasks(self) -> Sequence[Task]:
        return self._tasks

    def instance(self, task: Task, seed: int) -> Task:
        return task
