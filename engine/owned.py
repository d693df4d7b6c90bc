"""Owned execution: the validator runs every node of a plan itself, on simulated time.

A validator does not need anyone else to execute a miner's plan: the partner subnets
of a task are played by the reference tools (``dagnet run``'s registry, wired in by
``neurons/``), each subnet priced, delayed and failing as the task's published profile
says. The run happens on a :class:`~engine.simclock.SimulatedLoop`, so its latency,
timeouts and deadline are the profile's, not the machine's: the same plan, task and seed
give the same execution and the same score on every validator, quiet or loaded, and
``dagnet run --task`` gives a miner exactly the score a validator would.

What one plan may cost the validator is bounded by :class:`OwnedLimits`: the CPU its
tools burn (thread CPU time, measured around each call). Once a plan has used its
allowance, every further node attempt fails at once with ``owned cpu budget
exhausted``; a single call is bounded by the tools' own input and output limits
(docs/hardening.md). The allowance is far above what any family's reference plan uses,
so it never decides an honest plan's score.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protocol.plan import WorkflowPlan
from protocol.runner import Emit, FrameRunner, NodeCall, NodeResult, NodeRunner
from protocol.task import Task
from protocol.validation import PlanCheck

from .evaluate import Evaluation, run_task, score_execution
from .executor import Execution
from .routing import routed
from .simclock import run_simulated

__all__ = ["CPU_EXHAUSTED", "OwnedLimits", "OwnedRunnerFactory", "evaluate_owned", "run_owned"]

CPU_EXHAUSTED = "owned cpu budget exhausted"

OwnedRunnerFactory = Callable[[Task], NodeRunner]
"""Builds the runner that plays ``task``'s partner subnets (its ``available_tools``)."""


@dataclass(frozen=True, slots=True)
class OwnedLimits:
    cpu_per_plan_s: float = 10.0
    """Tool CPU seconds one plan's run may use before its remaining attempts fail."""

    def __post_init__(self) -> None:
        if not 0 < self.cpu_per_plan_s < float("inf"):
            raise ValueError("cpu_per_plan_s must be a positive number of seconds")


class _Metered:
    """A runner that counts the CPU its calls use and refuses calls past the allowance.

    Runs on the simulated loop's one thread, so ``thread_time`` around a call is that
    call's CPU (a sandboxed program's own CPU is bounded by the sandbox instead).
    """

    __slots__ = ("_runner", "_left")

    def __init__(self, runner: NodeRunner, cpu_s: float) -> None:
        self._runner = runner
        self._left = cpu_s

    async def run(self, call: NodeCall) -> NodeResult:
        if self._left <= 0:
            return NodeResult(None, error=CPU_EXHAUSTED)
        started = time.thread_time()
        try:
            return await self._runner.run(call)
        finally:
            self._left -= time.thread_time() - started

    async def run_frames(self, call: NodeCall, emit: Emit) -> NodeResult:
        if self._left <= 0:
            return NodeResult(None, error=CPU_EXHAUSTED)
        assert isinstance(self._runner, FrameRunner)
        started = time.thread_time()
        try:
            return await self._runner.run_frames(call, emit)
        finally:
            self._left -= time.thread_time() - started


def metered(runner: NodeRunner, limits: OwnedLimits) -> NodeRunner:
    """``runner`` under ``limits``; a frame runner stays a frame runner."""
    wrapped = _Metered(runner, limits.cpu_per_plan_s)
    return wrapped if isinstance(runner, FrameRunner) else _PlainMetered(wrapped)


class _PlainMetered:
    """:class:`_Metered` without ``run_frames``, for runners that have none."""

    __slots__ = ("_inner",)

    def __init__(self, inner: _Metered) -> None:
        self._inner = inner

    async def run(self, call: NodeCall) -> NodeResult:
        return await self._inner.run(call)


def run_owned(
    plan: WorkflowPlan, check: PlanCheck, task: Task, runner: NodeRunner, *, owned: OwnedLimits = OwnedLimits(),
    **options: Any,
) -> Execution:
    """Execute ``plan`` on ``task``'s instance on simulated time, each node on its subnet's
    ``top_k`` providers (:func:`~engine.routing.routed`), its tools' CPU bounded by
    ``owned``; ``options`` are :func:`~engine.evaluate.run_task`'s. Blocks this thread."""
    return run_simulated(run_task(plan, check, task, metered(routed(runner, task.route), owned), **options))


def evaluate_owned(plan: WorkflowPlan, check: PlanCheck, task: Task, runner: NodeRunner, **options: Any) -> Evaluation:
    """Execute ``plan`` on simulated time and score it: what a validator pays for it.
    ``options`` are :func:`run_owned`'s. Blocks."""
    execution = run_owned(plan, check, task, runner, **options)
    return Evaluation(execution, score_execution(task, check, execution))
