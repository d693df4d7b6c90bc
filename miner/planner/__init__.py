"""Reference planner strategies a miner can run (``--strategy``).

``good`` plans well (parallel where independent, cheapest allowed subnet that
fits the latency budget, declared retries and timeouts); ``naive`` is a plain
sequential chain. Both plan from the task's step hints, without a model.
``invalid`` and ``precompute`` are attackers (``attackers.py``): a local network
runs them to show that cheating earns nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from .attackers import InvalidPlanner, PrecomputePlanner
from .base import PlanningError, PlanProposal, Planner
from .good import GoodPlanner
from .naive import NaivePlanner

__all__ = [
    "ATTACKS",
    "STRATEGIES",
    "GoodPlanner",
    "InvalidPlanner",
    "NaivePlanner",
    "PlanProposal",
    "Planner",
    "PlanningError",
    "PrecomputePlanner",
    "get_planner",
]

STRATEGIES = ("good", "naive")
"""The reference strategies: honest plans from the step hints."""
ATTACKS = ("invalid", "precompute")

_FACTORIES: dict[str, Callable[[], Planner]] = {
    "good": GoodPlanner, "naive": NaivePlanner, "invalid": InvalidPlanner, "precompute": PrecomputePlanner,
}


def get_planner(name: str) -> Planner:
    """A fresh planner of strategy ``name``; ``KeyError`` lists the known names."""
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise KeyError(f"unknown planner strategy {name!r}; known: {', '.join(STRATEGIES + ATTACKS)}") from None
    return factory()
