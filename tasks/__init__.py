"""The task catalogue (v2): task families, their generators, seeds, and the shipped corpus.

A family (:class:`~tasks.family.Family`) is the package a miner sees plus the
generator a validator runs to make a hidden instance from a seed. The v2 set holds ten
families of each type: ``data_transform`` on hidden records, ``rag`` over a document
collection that comes with the instance, ``agent`` over hidden entities and numbers,
``code`` with hidden spec parameters and per-instance test cases. Besides them, a
validator draws fresh families per tempo from its secret (:func:`drawn_families`,
:mod:`tasks.drawn`: a grammar of typed compositions, each family checked before use).

This package is validator-side: miners may read it (it is public) but the validator's
sandbox never can, and the miner's tools never import it.
"""

from __future__ import annotations

import functools

from protocol.task import Task

from . import agent_families, code_families, data_families, rag_families
from .drawn import drawn_families
from .family import Family, Instance
from .seed import Draw

__all__ = ["VERSION", "Draw", "Family", "FamilyTasks", "Instance", "drawn_families", "family", "load_families"]

VERSION = "v2"


@functools.cache
def load_families() -> tuple[Family, ...]:
    """Every v2 family, in a fixed order (by type, then as listed in its module)."""
    out: list[Family] = []
    for module in (data_families, rag_families, agent_families, code_families):
        out += module.families(len(out))
    return tuple(out)


def family(task_id: str) -> Family:
    """The v2 family with ``task_id``; ``KeyError`` names the known ids."""
    for found in load_families():
        if found.task_id == task_id:
            return found
    raise KeyError(f"no task family {task_id!r}; known: {', '.join(f.task_id for f in load_families())}")


class FamilyTasks:
    """The v2 families as a validator's task source: ``tasks()`` shows each family with
    its public example, ``instance(task, seed)`` draws the hidden instance."""

    def tasks(self) -> tuple[Task, ...]:
        return tuple(f.task(f.example()) for f in load_families())

    def instance(self, task: Task, seed: int) -> Task:
        found = family(task.task_id)
        return found.task(found.instance(seed))
