"""Several draws of a step's world, for the margins (docs/scoring.md, "Several draws").

One run of a plan in the tempo's hidden world is one throw of its dice: a node that
fails every attempt zeroes ``S``, so a window of single runs has an error larger than
what a 2 % better plan earns. After the step's own run (draw 0), the validator runs each
distinct plan that was scored, and the reference's, again in more draws of the same world
(:meth:`subnets.world.World.drawn`: the same truths, other dice) and takes margins on each
plan's mean ``S`` over the draws. Every plan of a step gets the same draws (common random
numbers: the reference and a miner throw the same dice on every call they share), and
copies run once: answers with one canonical digest and one declared cost draw alike.

Draws come in rounds, each running every plan once in one more draw of the world; a round
counts only when all of it ran, so every plan's mean is over the same draws. Rounds stop
at :data:`MOST_DRAWS`, at the step's deadline, or once they have used as much of the
validator's CPU as the step used before them (at least :data:`CPU_FLOOR_S`): drawing at
most doubles a step's CPU, whatever its miners send (many distinct plans make fewer
draws, never a longer step).
A run or a score that fails in a round (an engine or scorer bug, a judgement stopped at
the deadline) ends the drawing there, charging nobody.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from engine.budget import Cores
from engine.evaluate import score_execution
from engine.executor import ExecutorConfig
from engine.owned import OwnedLimits, OwnedRunnerFactory, run_owned
from protocol.plan import WorkflowPlan
from protocol.task import Task
from protocol.validation import PlanCheck
from sandbox import stopping_at
from subnets.holdings import holding
from subnets.world import World

log = logging.getLogger(__name__)

MOST_DRAWS = 8
"""Draws of the world a step's margins are means over, at most (the step's own run included)."""
CPU_FLOOR_S = 0.5
"""CPU seconds drawing may use in a step, however little the step used before it."""

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Program:
    """One distinct answer to draw again: its plan, the plan's check and its declared cost."""

    plan: WorkflowPlan
    check: PlanCheck
    total_estimated_cost: float | None


@dataclass(frozen=True, slots=True)
class Drawn:
    """What the draws gave: how many draws every mean is over, each answer's mean ``S``,
    and why drawing stopped (one of :data:`STOPS`)."""

    draws: int
    means: Mapping[Any, float]
    stopped: str = "most"


STOPS = ("most", "cpu", "deadline", "failure")
"""Why a step's drawing stopped: :data:`MOST_DRAWS` reached, its CPU used, the step's
deadline, a failure of the validator's own."""


@dataclass(frozen=True, slots=True)
class DrawLimits:
    """When drawing stops: after ``most`` draws, at ``until`` (``time.monotonic()``; ``None``:
    no deadline), or once it has used ``cpu_s`` of the process's CPU."""

    cpu_s: float
    until: float | None = None
    most: int = MOST_DRAWS

    @classmethod
    def for_step(cls, step_cpu_s: float, until: float | None) -> DrawLimits:
        """The limits of a step that used ``step_cpu_s`` of CPU before drawing and ends at
        ``until``: as much CPU again, at least :data:`CPU_FLOOR_S`."""
        return cls(max(step_cpu_s, CPU_FLOOR_S), until)

    def spent(self, started_cpu: float) -> str | None:
        """Why drawing begun at :func:`cpu_s` ``started_cpu`` must stop now (``None``: it need not)."""
        if self.until is not None and time.monotonic() >= self.until:
            return "deadline"
        return "cpu" if cpu_s() - started_cpu >= self.cpu_s else None


def cpu_s() -> float:
    """The CPU seconds this process has used, its threads and its finished children (the
    sandboxed runs that judge ``code``) together."""
    used = os.times()
    return used.user + used.system + used.children_user + used.children_system


def draw_rounds(first: Mapping[K, float], score: Callable[[K, int], float], limits: DrawLimits) -> Drawn:
    """Each key's mean over the draws: ``first`` holds draw 0's ``S``, ``score(key, draw)``
    another draw's. Whole rounds only, while ``limits`` allow (see the module). Blocks."""
    started = cpu_s()
    runs = {key: [s] for key, s in first.items()}
    for draw in range(1, limits.most):
        stop = limits.spent(started)
        round_ = {}
        for key in runs if stop is None else ():
            try:
                round_[key] = score(key, draw)
            except Exception as exc:  # the validator's own failure: stop drawing, nobody is charged
                log.warning("draw %d failed, margins are over %d draw(s): %s: %s", draw, draw, type(exc).__name__, exc)
                return _drawn(runs, "failure")
            stop = limits.spent(started)
            if stop is not None:
                break  # this round did not end in time: it does not count
        if stop is not None:
            return _drawn(runs, stop)
        for key, s in round_.items():
            runs[key].append(s)
    return _drawn(runs, "most")


def mean_over(draws: Sequence[float]) -> float:
    """The mean of one answer's ``S`` over ``draws`` (draw 0 first), summed in draw order:
    what a replay must compute to get the same bits."""
    total = 0.0
    for s in draws:
        total += s
    return total / len(draws)


def _drawn(runs: Mapping[K, list[float]], stopped: str) -> Drawn:
    draws = len(next(iter(runs.values()), [0.0]))
    return Drawn(draws, {key: mean_over(s) for key, s in runs.items()}, stopped)


@dataclass(frozen=True, slots=True)
class WorldRuns:
    """How a step's plans run in a draw of its ``world``: as the step ran them (the
    validator's runner, the task's holdings, executor config, one plan's owned share,
    the machine's cores), scored by the step's scorer with sandboxed judging stopped at
    ``until``."""

    task: Task
    world: World
    runner: OwnedRunnerFactory
    config: ExecutorConfig
    owned: OwnedLimits
    cores: Cores | None = None
    until: float | None = None

    def score(self, program: Program, draw: int) -> float:
        """``program``'s ``S`` in draw ``draw`` of the world. Blocks."""
        task = self.task
        runner = holding(self.runner(task, world=self.world.drawn(draw)), task.holdings)
        execution = run_owned(
            program.plan,
            program.check,
            task,
            runner,
            total_estimated_cost=program.total_estimated_cost,
            config=self.config,
            owned=self.owned,
            cores=self.cores,
        )
        if self.until is None:
            return score_execution(task, program.check, execution).S
        with stopping_at(self.until):
            return score_execution(task, program.check, execution).S


def drawn_means(runs: WorldRuns, programs: Mapping[K, tuple[Program, float]], limits: DrawLimits) -> Drawn:
    """Each program's mean ``S`` over the draws of ``runs``' world (draw 0's ``S`` given
    beside it), in whole rounds while ``limits`` allow. Blocks."""
    first = {key: s for key, (_, s) in programs.items()}
    return draw_rounds(first, lambda key, draw: runs.score(programs[key][0], draw), limits)
