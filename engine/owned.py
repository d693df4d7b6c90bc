"""Owned execution: the validator runs every node of a plan itself, on simulated time.

A validator does not need anyone else to execute a miner's plan: the partner subnets
of a task are played by the reference tools (``dagnet run``'s registry, wired in by
``neurons/``), each subnet priced, delayed and failing as the task's published profile
says. The run happens on a :class:`~engine.simclock.SimulatedLoop`, so its latency,
timeouts and deadline are the profile's, not the machine's: the same plan, task and seed
give the same execution and the same score on every validator, quiet or loaded, and
``dagnet run --task`` gives a miner exactly the score a validator would.

What one plan may cost the validator is bounded by :class:`OwnedLimits`: the seconds of
work its attempts do — the CPU of the tools (in this thread or a tool process), and the
wall time a ``python_exec`` program (or a model) keeps its thread waiting. Each piece of
an attempt's work reserves its worst case from the plan's :class:`~engine.budget.Allowance`
before it starts and is charged what it used when it ends, so parallel nodes cannot
overdraw it, and the tools stop a piece at what the plan has left
(:data:`~protocol.runner.WORK_LEFT_S`): one plan's work is at most its allowance plus
one attempt's. Once the allowance is used, every further attempt fails at once with
``owned cpu budget exhausted``. The allowance is far above what any family's reference plan uses, so it
never decides an honest plan's score.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Generator
from dataclasses import dataclass
from typing import Any, Protocol, cast

from protocol.plan import WorkflowPlan
from protocol.runner import WORK_LEFT_S, Emit, FrameRunner, NodeCall, NodeResult, NodeRunner
from protocol.task import Task
from protocol.validation import PlanCheck
from sandbox import SandboxLimits

from .budget import Allowance, Cores
from .evaluate import Evaluation, run_task, score_execution
from .executor import Execution
from .report import run_report
from .routing import routed
from .simclock import run_simulated

__all__ = ["CPU_EXHAUSTED", "OwnedLimits", "OwnedRunnerFactory", "evaluate_owned", "run_owned"]

CPU_EXHAUSTED = "owned cpu budget exhausted"


class OwnedRunnerFactory(Protocol):
    """The runner that plays a task's partner subnets in owned execution, as ``world`` (a
    tempo's hidden world, :mod:`subnets.world`, which the engine does not know) says."""

    def __call__(self, task: Task, *, world: Any = ...) -> NodeRunner:
        """Builds the runner that plays ``task``'s partner subnets (its ``available_tools``)."""
        ...


@dataclass(frozen=True, slots=True)
class OwnedLimits:
    cpu_per_plan_s: float = 10.0
    """Seconds of work (tools' CPU and ``python_exec``'s wall time) one plan's run may use
    before its remaining attempts fail."""
    attempt_reserve_s: float = SandboxLimits().wall_seconds
    """What one piece of an attempt's work reserves while it runs: its worst case, a
    ``python_exec`` call's wall limit (a CPU tool's call stops sooner, at its CPU limit)."""

    def __post_init__(self) -> None:
        for name in ("cpu_per_plan_s", "attempt_reserve_s"):
            if not 0 < getattr(self, name) < float("inf"):
                raise ValueError(f"{name} must be a positive number of seconds")

    def allowance(self, closed: threading.Event | None = None, cores: Cores | None = None) -> Allowance:
        """A fresh allowance for one plan; setting ``closed`` refuses its further work; with
        ``cores``, each piece waits its turn for one (least-used plan first)."""
        return Allowance(self.cpu_per_plan_s, self.attempt_reserve_s, closed, cores)


class _Metered:
    """A runner whose attempts do their work against one plan's allowance."""

    __slots__ = ("_runner", "_allowance")

    def __init__(self, runner: NodeRunner, allowance: Allowance) -> None:
        self._runner = runner
        self._allowance = allowance

    def run(self, call: NodeCall) -> Awaitable[NodeResult]:
        return _MeteredAttempt(self._runner.run(call), self._allowance)

    def run_frames(self, call: NodeCall, emit: Emit) -> Awaitable[NodeResult]:
        assert isinstance(self._runner, FrameRunner)
        return _MeteredAttempt(self._runner.run_frames(call, emit), self._allowance)


class _MeteredAttempt:
    """Awaits an attempt one resumption at a time: each runs only on a reservation from
    the allowance and is charged the work it did (:meth:`SimulatedLoop.work_s`).

    An attempt runs until it waits (a subnet's latency, on simulated time) and then does
    its work in one go; so a reservation is taken at the moment work starts, not when the
    attempt starts, and a plan of many parallel nodes meets the allowance node by node.
    A resumption the allowance refuses closes the attempt, which fails with
    :data:`CPU_EXHAUSTED`; an exception thrown in (a timeout's cancellation) is always
    delivered, so cancellation is never swallowed.
    """

    __slots__ = ("_attempt", "_allowance")

    def __init__(self, attempt: Awaitable[NodeResult], allowance: Allowance) -> None:
        self._attempt = attempt
        self._allowance = allowance

    def __await__(self) -> Generator[Any, Any, NodeResult]:
        steps, allowance = self._attempt.__await__(), self._allowance
        # The simulated loop counts the work it waits for; elsewhere only this thread's CPU counts.
        work_s = getattr(asyncio.get_running_loop(), "work_s", time.thread_time)
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            with allowance.turn():
                left, held = allowance.left(), allowance.reserve()
                if held is not None:
                    WORK_LEFT_S.set(left)  # the tools' own limits stop this piece there
                elif thrown is None:
                    steps.close()
                    return NodeResult(None, error=CPU_EXHAUSTED)
                else:
                    held = allowance.hold(allowance.worst)
                started = work_s()
                try:
                    yielded = steps.send(sent) if thrown is None else steps.throw(thrown)
                except StopIteration as done:
                    return cast(NodeResult, done.value)  # the attempt's result: StopIteration is untyped
                finally:
                    allowance.settle(held, work_s() - started)
            try:
                sent, thrown = (yield yielded), None
            except GeneratorExit:
                steps.close()
                raise
            except BaseException as exc:
                sent, thrown = None, exc


def metered(
    runner: NodeRunner, limits: OwnedLimits, *, closed: threading.Event | None = None, cores: Cores | None = None
) -> NodeRunner:
    """``runner`` doing its work against one plan's allowance under ``limits`` (see
    :meth:`OwnedLimits.allowance` for ``closed`` and ``cores``); a frame runner stays a
    frame runner."""
    wrapped = _Metered(runner, limits.allowance(closed, cores))
    return wrapped if isinstance(runner, FrameRunner) else _PlainMetered(wrapped)


class _PlainMetered:
    """:class:`_Metered` without ``run_frames``, for runners that have none."""

    __slots__ = ("_inner",)

    def __init__(self, inner: _Metered) -> None:
        self._inner = inner

    def run(self, call: NodeCall) -> Awaitable[NodeResult]:
        return self._inner.run(call)


def run_owned(
    plan: WorkflowPlan,
    check: PlanCheck,
    task: Task,
    runner: NodeRunner,
    *,
    owned: OwnedLimits = OwnedLimits(),
    closed: threading.Event | None = None,
    cores: Cores | None = None,
    **options: Any,
) -> Execution:
    """Execute ``plan`` on ``task``'s instance on simulated time, each node on its subnet's
    ``top_k`` providers (:func:`~engine.routing.routed`), each provider's work bounded by
    ``owned``; setting ``closed`` (from any thread) fails every attempt that has work left
    to do, so the run winds down within one piece of work; ``cores`` shares the machine
    with other plans run at the same time. ``options`` are
    :func:`~engine.evaluate.run_task`'s. Blocks this thread."""
    metered_runner = metered(runner, owned, closed=closed, cores=cores)
    return run_simulated(run_task(plan, check, task, routed(metered_runner, task.route), **options))


def evaluate_owned(plan: WorkflowPlan, check: PlanCheck, task: Task, runner: NodeRunner, **options: Any) -> Evaluation:
    """Execute ``plan`` on simulated time and score it: what a validator pays for it.
    ``options`` are :func:`run_owned`'s. Blocks."""
    execution = run_owned(plan, check, task, runner, **options)
    return Evaluation(execution, score_execution(task, check, execution))


def owned_report(
    plan: WorkflowPlan, check: PlanCheck, task: Task, runner: NodeRunner, **options: Any
) -> dict[str, Any]:
    """The run report of ``plan`` scored on ``task``'s instance by owned execution
    (:func:`evaluate_owned`), with the task's id and seed: what ``dagnet run --task`` prints
    and what the benches compare. ``options`` are :func:`run_owned`'s. Blocks."""
    evaluation = evaluate_owned(plan, check, task, runner, **options)
    report = run_report(evaluation.execution, score=evaluation.score.model_dump())
    return {**report, "task_id": task.task_id, "seed": task.seed}
