"""The outcome of a run: the :class:`Execution` built from its nodes once it is over."""

from __future__ import annotations

import math
from typing import Any

from protocol.outcomes import RunStatus
from protocol.plan import WorkflowPlan
from protocol.run_metrics import RunMetrics
from protocol.validation import PlanCheck

from .model import BLOCKED, BUDGET_ABORT, FAILED, SUCCESS, Execution, NodeStatus
from .nodes import _Node

__all__ = ["execution", "invalid"]


def invalid(plan: WorkflowPlan, check: PlanCheck, ceiling: float | None) -> Execution:
    return Execution(
        status=RunStatus.INVALID,
        errors=list(check.errors),
        nodes={},
        metrics=RunMetrics(0.0, 0.0, 0.0, 0, 0, 0, 0),
        budget_ceiling=ceiling,
        tiers=check.tiers,
        critical_path_s=check.critical_path_s,
        final_output=None,
        output_node=None,
        total_steps=len(plan.nodes),
    )


def execution(
    plan: WorkflowPlan,
    check: PlanCheck,
    nodes: list[_Node],
    outputs: dict[str, dict[str, Any]],
    span: tuple[float | None, float | None],
    ceiling: float | None,
) -> Execution:
    """The outcome; ``nodes`` holds the plan's nodes, then the frame instances the run
    added; ``span`` is (first dispatch, last settle) in seconds from the start."""
    planned = nodes[: len(plan.nodes)]
    statuses = [node.status for node in planned]
    output_node = _output_node(plan, check, planned)
    metrics = _metrics(nodes, planned, statuses, *span)  # before record() sums instances into their node
    return Execution(
        status=_overall(statuses),
        errors=[],
        nodes={node.id: node.record() for node in planned},
        metrics=metrics,
        budget_ceiling=ceiling,
        tiers=check.tiers,
        critical_path_s=check.critical_path_s,
        final_output=outputs.get(output_node) if output_node is not None else None,
        output_node=output_node,
        total_steps=len(planned),
    )


def _metrics(
    nodes: list[_Node], planned: list[_Node], statuses: list[NodeStatus], t_first: float | None, t_last: float | None
) -> RunMetrics:
    """Costs, retries and timeouts over every attempt (instances included); completion
    and hard failures over the plan's nodes, each counting once."""
    latency = 0.0
    if t_first is not None and t_last is not None:
        latency = max(0.0, t_last - t_first)
    completed = statuses.count(SUCCESS) if len(nodes) == len(planned) else sum(map(_completion, planned))
    return RunMetrics(
        completion_ratio=completed / len(planned),
        latency_s=latency,
        cost_tao=math.fsum([node.cost_tao for node in nodes]),  # exact: the same in any node order
        retries=sum([node.attempts - 1 for node in nodes if node.attempts > 1]),
        unplanned_retries=sum([node.unplanned_retries for node in nodes]),
        timeouts=sum([node.timeouts for node in nodes]),
        hard_failures=statuses.count(FAILED) + statuses.count(BLOCKED),
    )


def _completion(node: _Node) -> float:
    """A node's share of completion_ratio: 1 if it succeeded; for a frame-scoped node, the
    fraction of its instances that succeeded (with none, whether its generator did)."""
    if not node.per_frame:
        return 1.0 if node.status == SUCCESS else 0.0
    return sum(1 for inst in node.per_frame if inst.status == SUCCESS) / len(node.per_frame)


def _output_node(plan: WorkflowPlan, check: PlanCheck, nodes: list[_Node]) -> str | None:
    """The output node; else the single sink; else the last sink that succeeded."""
    if plan.output_node is not None:
        return plan.output_node
    assert check.graph is not None
    sinks = [node for node, succs in zip(nodes, check.graph.succs) if not succs]
    if len(sinks) == 1:
        return sinks[0].id
    for node in reversed(sinks):
        if node.status == SUCCESS:
            return node.id
    return None


def _overall(statuses: list[NodeStatus]) -> RunStatus:
    if statuses.count(SUCCESS) == len(statuses):
        return RunStatus.COMPLETED
    if BUDGET_ABORT in statuses:
        return RunStatus.BUDGET_ABORT
    return RunStatus.PARTIAL
