"""One path from a plan to its score: bind the instance's inputs, execute under the
budget ceiling and the deadline (:func:`run_task`), score (:func:`score_execution`).

``dagnet run --task``, the validation step and ``dagnet bench tasks`` all go through
here — on the validator's own execution and simulated time by default
(:mod:`engine.owned`) — so a plan scores the same wherever it runs. A plan run with
no task (``dagnet run PLAN``) gets its ceiling and deadline here too (:func:`run_plan`).

Budget: every node is priced at the larger of its declared ``estimated_cost`` and what
the validator expects its subnet to charge (``avg_cost × top_k``). Those prices are the
in-flight reservations, and ``1.5 ×`` their sum (or the declared total, if larger) caps
the ceiling below ``max_budget_tao``. A plan that declares estimates of 0 is priced at
the validator's prices, so it can never spend more than ``max_budget_tao`` plus what its
nodes already in flight at the crossing cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from protocol.plan import WorkflowPlan
from protocol.runner import NodeRunner
from protocol.synapse import TaskPackage
from protocol.task import Task
from protocol.validation import PlanCheck
from scoring.composite import Score, invalid_score
from scoring.evaluate import score_run

from .executor import Execution, execute

__all__ = [
    "DEADLINE_FACTOR",
    "NO_TASK_LATENCY_S",
    "Evaluation",
    "budget_ceiling",
    "expected_prices",
    "run_plan",
    "run_task",
    "score_execution",
]

DEADLINE_FACTOR = 2.0
"""The global deadline is this many times the task's ``max_latency_seconds``."""
NO_TASK_LATENCY_S = 60.0
"""The latency limit a plan run without a task is held to."""


@dataclass(frozen=True, slots=True)
class Evaluation:
    execution: Execution
    score: Score


def budget_ceiling(max_budget_tao: float | None, total_estimated_cost: float) -> float | None:
    """``min(max_budget, 1.5 × estimate)``; an estimate of 0 contributes nothing; None when neither."""
    bounds = []
    if max_budget_tao is not None:
        bounds.append(max_budget_tao)
    if total_estimated_cost > 0:
        bounds.append(1.5 * total_estimated_cost)
    return min(bounds) if bounds else None


def expected_prices(package: TaskPackage) -> dict[str, float]:
    """What the validator expects one node on each subnet to cost: ``avg_cost × top_k``."""
    return {subnet: info.avg_cost * package.route(subnet).top_k for subnet, info in package.available_tools.items()}


def ceiling(package: TaskPackage, plan: WorkflowPlan, total_estimated_cost: float | None) -> float | None:
    """``min(max_budget_tao, 1.5 × estimate)``, the estimate priced node by node at no
    less than the validator's own prices."""
    prices = expected_prices(package)
    priced = sum(max(node.estimated_cost, prices.get(node.subnet, 0.0)) for node in plan.nodes)
    return budget_ceiling(package.constraints.max_budget_tao, max(total_estimated_cost or 0.0, priced))


RECOMPUTE: Any = object()
"""``run_task``'s ``recorded_ceiling`` when the ceiling is worked out from the plan."""


async def run_task(
    plan: WorkflowPlan,
    check: PlanCheck,
    task: Task,
    runner: NodeRunner,
    *,
    total_estimated_cost: float | None,
    recorded_ceiling: float | None = RECOMPUTE,
    **options: Any,
) -> Execution:
    """Execute ``plan`` on ``task``'s instance under the validator's budget and deadline.
    ``recorded_ceiling`` replaces the budget ceiling by the one a record kept (an audit's
    re-run). ``options`` are :func:`~engine.executor.execute`'s ``config``, ``limits`` and ``on_event``."""
    budget = ceiling(task, plan, total_estimated_cost) if recorded_ceiling is RECOMPUTE else recorded_ceiling
    return await execute(
        plan,
        runner,
        task_id=task.task_id,
        check=check,
        budget_ceiling=budget,
        deadline_s=DEADLINE_FACTOR * task.constraints.max_latency_seconds,
        inputs=task.instance_inputs,
        prices=expected_prices(task),
        **options,
    )


async def run_plan(
    plan: WorkflowPlan,
    check: PlanCheck,
    runner: NodeRunner,
    *,
    total_estimated_cost: float | None,
    inputs: Mapping[str, Any] | None = None,
    **options: Any,
) -> Execution:
    """Execute ``plan`` with no task: the ceiling is 1.5 × its declared estimate (the
    sum of its nodes' when it declares none), the deadline ``DEADLINE_FACTOR ×``
    :data:`NO_TASK_LATENCY_S`; ``inputs`` bind its ``${input.*}`` refs; ``options`` as
    :func:`run_task`'s."""
    estimate = plan.estimated_cost() if total_estimated_cost is None else total_estimated_cost
    return await execute(
        plan,
        runner,
        task_id="local",
        check=check,
        budget_ceiling=budget_ceiling(None, estimate),
        deadline_s=DEADLINE_FACTOR * NO_TASK_LATENCY_S,
        inputs=inputs,
        **options,
    )


def score_execution(task: Task, check: PlanCheck, execution: Execution) -> Score:
    """The execution's score; an invalid plan scores 0 with its errors as the reason.

    Blocking: judging ``code`` waits on sandboxed processes. Async callers run it in a
    worker thread.
    """
    if not check.runnable:
        return invalid_score("; ".join(check.errors) or "invalid plan")
    return score_run(task, metrics=execution.metrics, final_output=execution.final_output)
