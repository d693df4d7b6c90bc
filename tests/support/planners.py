"""Planners that misbehave on purpose, importable by name (``support.planners:SpinsOnDoomed``)
so a miner process, and each planning process, can load them.

Each plans like :class:`~support.miner.FakePlanner` except on a task whose id starts
with :data:`DOOMED`.
"""

from __future__ import annotations

import os
import time

from protocol.synapse import TaskPackage

from .miner import FakePlanner

DOOMED = "doomed"


class SpinsOnDoomed(FakePlanner):
    """Spins for ever on a doomed task: only a kill stops it."""

    name = "spins"

    def plan(self, package: TaskPackage):
        while package.task_id.startswith(DOOMED):
            pass
        return super().plan(package)


class ExitsOnDoomed(FakePlanner):
    """Ends its whole process on a doomed task, as ``os._exit`` does: no exception to catch."""

    name = "exits"

    def plan(self, package: TaskPackage):
        if package.task_id.startswith(DOOMED):
            os._exit(3)
        return super().plan(package)


class BurnsCpu(FakePlanner):
    """Spends ``cpu_s`` of CPU on every task before planning it."""

    name = "burns"

    def __init__(self, cpu_s: float = 0.05) -> None:
        self.cpu_s = cpu_s

    def plan(self, package: TaskPackage):
        until = time.process_time() + self.cpu_s
        while time.process_time() < until:
            pass
        return super().plan(package)


class Remembers(FakePlanner):
    """Puts ``note`` in its reasoning: what a planner learned shows in its next plan."""

    name = "remembers"
    note = "nothing yet"

    def plan(self, package: TaskPackage):
        proposal = super().plan(package)
        return type(proposal)(
            proposal.plan,
            proposal.total_estimated_cost,
            proposal.total_estimated_latency,
            proposal.confidence,
            self.note,
        )


SLOW = "slow"
SLOW_PLAN_S = 2.0
"""How long :class:`SlowOnSlow` takes over a task whose id starts with :data:`SLOW`."""
PLAN_S = 0.2
"""How long it takes over any other task."""


class SlowOnSlow(FakePlanner):
    """Takes :data:`SLOW_PLAN_S` (wall time) over a slow task and :data:`PLAN_S` over any
    other, as a planner whose work is searching or calling out would: the time a planning
    process is held, the same however loaded the machine is."""

    name = "slow"

    def plan(self, package: TaskPackage):
        time.sleep(SLOW_PLAN_S if package.task_id.startswith(SLOW) else PLAN_S)
        return super().plan(package)
