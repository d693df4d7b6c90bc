"""Reference planner strategies a miner can run (``--strategy``).

``good`` plans well (parallel where independent, cheapest allowed subnet that
fits the latency budget, declared retries and timeouts); ``naive`` is a plain
sequential chain. Both plan from the task's step hints, without a model.
"""

from __future__ import annotations

from collections.abc import Callable

from .base import PlanningError, PlanProposal, Planner
from .good import GoodPlanner
from .naive import NaivePlanner

__all__ = [
    "STRATEGIES",
    "GoodPlanner",
    "NaivePlanner",
    "PlanProposal",
    "Planner",
    "PlanningError",
    "get_planner",
]

STRATEGIES = ("good", "naive")

_FACTORIES: dict[str, Callable[[], Planner]] = {"good": GoodPlanner, "naive": NaivePlanner}


def get_planner(name: str) -> Planner:
    """A fresh planner of strategy ``name``; ``KeyError`` lists the known names."""
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise KeyError(f"unknown planner strategy {name!r}; known: {', '.join(STRATEGIES)}") from None
    return factory()
