"""Planners: the interface a miner's planner implements, the loader that finds one
by name (``dagnet miner --planner NAME``), and the reference planners.

``good`` plans well (parallel where independent, cheapest allowed subnet that
fits the latency budget, declared retries and timeouts); ``naive`` is a plain
sequential chain. Both plan from the task's step hints, without a model.
``invalid`` and ``precompute`` are attackers (``attackers.py``): a local network
runs them to show that cheating earns nothing. Each is a plain implementation of
:class:`Planner` (``base.py``, docs/planner.md).
"""

from __future__ import annotations

from .attackers import InvalidPlanner, PrecomputePlanner
from .base import (
    PLANNER_INTERFACE,
    PLANNER_TIMEOUT_S,
    Planner,
    PlannerFailure,
    PlanningError,
    PlanProposal,
    PlanResult,
    answer_for,
    run_planner,
)
from .good import GoodPlanner
from .loader import BUILTINS, ENTRY_POINT_GROUP, PlannerLoadError, installed_planners, load_planner
from .naive import NaivePlanner

__all__ = [
    "ATTACKS",
    "BUILTINS",
    "ENTRY_POINT_GROUP",
    "PLANNER_INTERFACE",
    "PLANNER_TIMEOUT_S",
    "REFERENCE_PLANNERS",
    "GoodPlanner",
    "InvalidPlanner",
    "NaivePlanner",
    "PlanProposal",
    "PlanResult",
    "Planner",
    "PlannerFailure",
    "PlannerLoadError",
    "PlanningError",
    "PrecomputePlanner",
    "answer_for",
    "installed_planners",
    "load_planner",
    "run_planner",
]

REFERENCE_PLANNERS = ("good", "naive")
"""The reference planners: honest plans from the step hints."""
ATTACKS = ("invalid", "precompute")
