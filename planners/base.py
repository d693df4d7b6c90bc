"""The planner interface (version :data:`PLANNER_INTERFACE`): what a planner receives,
what it returns, how it says it cannot plan, and how the miner calls it.

A planner is any object with a ``name`` and a ``plan(package)`` method:

- it receives the :class:`~protocol.synapse.TaskPackage` a validator sent (the body of
  ``POST /WorkflowSynapse``, without the miner fields);
- it returns a :class:`PlanProposal` (a plan and the miner fields), a complete
  :class:`~protocol.synapse.WorkflowSynapse` answer, or a bare
  :class:`~protocol.plan.WorkflowPlan` (its estimates are then the plan's own);
- ``plan`` may be a plain function or ``async def``; a plain one runs in a thread of
  its own, so it may block;
- it raises :class:`PlanningError` when it cannot plan the task (the miner answers 422
  ``unplannable``). Anything else it raises, returns or takes longer than the
  deadline for costs that one query: :func:`run_planner` turns it into a
  :class:`PlannerFailure` that names its kind.

A planner may also have ``observe(feedback)``: the miner hands it every
:class:`~protocol.feedback.StepFeedback` a validator sends about this miner's own
steps, and at start-up replays the ones it has kept (:func:`observe`). A planner
without it is unaffected; one whose ``observe`` raises has it logged, and nothing else.

A planner may declare ``interface = PLANNER_INTERFACE``; one that declares another
version is refused when it is loaded (:mod:`planners.loader`). docs/planner.md is
the page a miner reads.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import threading
import traceback
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, Union

from pydantic import ValidationError

from protocol.errors import format_validation_error
from protocol.feedback import StepFeedback
from protocol.graph import Graph
from protocol.plan import WorkflowPlan
from protocol.synapse import SCORING_VERSION, TaskPackage, WorkflowSynapse

__all__ = [
    "FAILURE_KINDS",
    "PLANNER_INTERFACE",
    "PLANNER_TIMEOUT_S",
    "FailureKind",
    "PlanProposal",
    "PlanResult",
    "Planner",
    "PlannerFailure",
    "PlanningError",
    "answer_for",
    "estimate",
    "observe",
    "plan_here",
    "run_planner",
]

PLANNER_INTERFACE = 1
"""The version of this interface. It changes only when an existing planner would break."""

PLANNER_TIMEOUT_S = 6.0
"""How long the miner waits for a plan by default: below the validator's 8 s query
timeout, so a slow planner still gets a clear answer back to the validator in time."""

_REASON_CHARS = 300
log = logging.getLogger("dagnet.miner")
_PACKAGE_FIELDS = set(TaskPackage.model_fields) - {"scoring_version", "forecast"}
"""What an answer echoes of its package (a set: how ``model_dump(include=)`` is typed): not
the forecast, which the validator sent and keeps."""

FailureKind = Literal["unplannable", "error", "timeout", "invalid"]
FAILURE_KINDS: tuple[FailureKind, ...] = ("unplannable", "error", "timeout", "invalid")


class PlanningError(ValueError):
    """The package cannot be planned (no steps, no subnet of a kind, steps whose
    DataRefs form a cycle...). The message says what is missing."""


class PlannerFailure(Exception):
    """A planner call that produced no answer: ``kind`` is ``unplannable`` (it raised
    :class:`PlanningError`), ``error`` (it raised anything else), ``timeout`` or
    ``invalid`` (it returned something that is not an answer). An ``error`` carries the
    planner's formatted traceback (``traceback``), for the miner's log: the reason alone
    is what the validator is told."""

    def __init__(self, kind: FailureKind, reason: str, traceback: str | None = None) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
        self.traceback = traceback


@dataclass(frozen=True)
class PlanProposal:
    """A plan and the miner fields that go with it in a ``WorkflowSynapse`` answer."""

    plan: WorkflowPlan
    total_estimated_cost: float
    total_estimated_latency: float
    confidence: float
    reasoning: str

    def answer(self, package: TaskPackage, miner_uid: int) -> WorkflowSynapse:
        """The ``WorkflowSynapse`` response: ``package`` with every miner field filled,
        validated (``ValidationError`` when a field is not what the wire allows)."""
        return WorkflowSynapse.model_validate(
            {
                **package.model_dump(include=_PACKAGE_FIELDS),
                "miner_uid": miner_uid,
                "scoring_version": SCORING_VERSION,
                "workflow_plan": self.plan,
                "total_estimated_cost": self.total_estimated_cost,
                "total_estimated_latency": self.total_estimated_latency,
                "confidence": self.confidence,
                "reasoning": self.reasoning,
            }
        )


PlanResult = Union[PlanProposal, WorkflowSynapse, WorkflowPlan]
"""What ``plan`` may return (or, for an async planner, resolve to)."""


class Planner(Protocol):
    """The interface every planner implements; see the module docstring."""

    name: str

    def plan(self, package: TaskPackage) -> PlanResult | Awaitable[PlanResult]:
        """Design a plan for ``package``; raises :class:`PlanningError` when it cannot."""
        ...


def observe(planner: Planner, feedback: StepFeedback) -> bool:
    """Hand ``feedback`` to ``planner.observe`` when it has one; whether it took it.

    Whatever ``observe`` raises is logged and goes no further: feedback is for learning,
    and a planner that cannot learn from it still plans."""
    method = getattr(planner, "observe", None)
    if not callable(method):
        return False
    try:
        method(feedback)
    except Exception as exc:
        log.warning(
            "planner %s: observe raised %s: %s",
            getattr(planner, "name", "?"),
            type(exc).__name__,
            _short(str(exc)),
            exc_info=exc,
        )
        return False
    return True


async def run_planner(planner: Planner, package: TaskPackage, *, timeout_s: float = PLANNER_TIMEOUT_S) -> PlanResult:
    """``planner.plan(package)`` within ``timeout_s``, off the event loop when it is not
    async. Raises :class:`PlannerFailure` for every way it can fail, never anything else
    (a plain planner left running past the deadline finishes in its daemon thread and
    its result is dropped)."""
    try:
        async with asyncio.timeout(timeout_s):
            if inspect.iscoroutinefunction(planner.plan):
                result = await planner.plan(package)
            else:
                result = await _in_thread(planner.plan, package)
                if inspect.isawaitable(result):
                    result = await result
    except BaseException as exc:
        raise _failure(exc, timeout_s) from None
    return _checked(result)


def plan_here(planner: Planner, package: TaskPackage) -> PlanResult:
    """``planner.plan(package)`` on this thread, outside any event loop (an async planner
    gets one of its own), with no deadline: how a planning process
    (:mod:`miner.workers`) calls it, its supervisor owning the deadline. Raises
    :class:`PlannerFailure` as :func:`run_planner` does."""
    try:
        result = planner.plan(package)
        if inspect.isawaitable(result):
            result = asyncio.run(_awaited(result))
    except BaseException as exc:
        raise _failure(exc, None) from None
    return _checked(result)


def _failure(exc: BaseException, timeout_s: float | None) -> PlannerFailure:
    """The failure a planner's exception amounts to; anything but an ``Exception`` or
    ``SystemExit`` (a cancellation, Ctrl-C) is raised again."""
    if isinstance(exc, PlanningError):
        return PlannerFailure("unplannable", _short(f"cannot plan this task: {exc}"))
    if isinstance(exc, TimeoutError) and timeout_s is not None:
        return PlannerFailure("timeout", f"the planner did not answer within {timeout_s:g}s")
    if isinstance(exc, (Exception, SystemExit)):
        return PlannerFailure(
            "error", _short(f"the planner raised {type(exc).__name__}: {exc}"), "".join(traceback.format_exception(exc))
        )
    raise exc


def _checked(result: Any) -> PlanResult:
    if not isinstance(result, (PlanProposal, WorkflowSynapse, WorkflowPlan)):
        raise PlannerFailure("invalid", f"the planner returned a {type(result).__name__}, not a plan")
    return result


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def answer_for(result: PlanResult, package: TaskPackage, miner_uid: int) -> WorkflowSynapse:
    """The ``WorkflowSynapse`` a miner sends for ``result``; :class:`PlannerFailure`
    (``invalid``) when it cannot be one: a field out of range, or an answer to another task."""
    try:
        if isinstance(result, WorkflowPlan):
            result = _bare(result)
        if isinstance(result, PlanProposal):
            return result.answer(package, miner_uid)
        if result.task_id != package.task_id:
            raise PlannerFailure("invalid", f"the planner answered task {result.task_id!r}, not {package.task_id!r}")
        return WorkflowSynapse.model_validate(
            {
                **result.model_dump(),
                **package.model_dump(include=_PACKAGE_FIELDS),
                "miner_uid": miner_uid,
                "scoring_version": SCORING_VERSION,
            }
        )
    except ValidationError as exc:
        raise PlannerFailure(
            "invalid", _short(f"the planner's answer is invalid: {format_validation_error(exc)}")
        ) from None


def _bare(plan: WorkflowPlan) -> PlanProposal:
    """A bare plan with the plan's own estimates (the critical path for latency)."""
    try:
        cost, latency = estimate(plan)
    except Exception:  # a cyclic or overflowing plan: the validator says what is wrong with it
        cost, latency = 0.0, 0.0
    return PlanProposal(plan, cost, latency, 0.5, "a plan without notes")


def estimate(plan: WorkflowPlan) -> tuple[float, float]:
    """Total estimated cost and latency from the nodes' estimates.

    The latency is the critical path, which is what a dependency-driven executor
    takes when every node meets its estimate.
    """
    latencies = [node.estimated_latency for node in plan.nodes]
    cost, latency = plan.estimated_cost(), Graph.from_plan(plan).critical_path(latencies)
    if not math.isfinite(cost + latency):
        raise PlanningError("the plan's total estimates overflow")
    return cost, latency


async def _in_thread(fn: Any, arg: Any) -> Any:
    """``fn(arg)`` in a daemon thread: one that never returns cannot hold up the
    event loop, a worker pool, or the process's exit."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():  # the caller stopped waiting (deadline)
            return
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)

    def work() -> None:
        try:
            outcome: tuple[Any, BaseException | None] = (fn(arg), None)
        except BaseException as exc:  # noqa: BLE001 — handed to the caller as is
            outcome = (None, exc)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:  # the loop closed while the planner ran
            pass

    threading.Thread(target=work, name="dagnet-planner", daemon=True).start()
    return await future


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"
