"""The nodes of a :class:`protocol.feedback.StepFeedback`, built from one execution."""

from __future__ import annotations

from collections.abc import Iterator

from protocol.feedback import MAX_FEEDBACK_NODES, AttemptFeedback, NodeFeedback, clip_reason
from protocol.plan import WorkflowPlan

from .model import Execution, NodeRecord

__all__ = ["node_feedback"]


def node_feedback(plan: WorkflowPlan, execution: Execution) -> tuple[list[NodeFeedback], int]:
    """Every node of ``plan`` as ``execution`` ran it (frame instances after their node),
    at most :data:`~protocol.feedback.MAX_FEEDBACK_NODES`; and how many were left out."""
    specs = {node.id: node for node in plan.nodes}
    listed: list[NodeFeedback] = []
    total = 0
    for node_id, record in execution.nodes.items():
        spec = specs.get(node_id)
        if spec is None:
            continue
        for one in _with_instances(record):
            total += 1
            if len(listed) < MAX_FEEDBACK_NODES:
                listed.append(_node(node_id, spec.subnet, spec.action, one))
    return listed, total - len(listed)


def _with_instances(record: NodeRecord) -> Iterator[NodeRecord]:
    yield record
    yield from record.instances


def _node(node_id: str, subnet: str, action: str, record: NodeRecord) -> NodeFeedback:
    attempts = [
        AttemptFeedback(
            started_s=max(0.0, a.started_s), latency_s=max(0.0, a.finished_s - a.started_s), error=clip_reason(a.error)
        )
        for a in record.attempt_log[-64:]
    ]
    return NodeFeedback(
        node_id=node_id,
        subnet=subnet,
        action=action,
        status=record.status,
        reason=clip_reason(record.reason),
        cost_tao=max(0.0, record.cost_tao),
        attempts=attempts,
        frame=record.frame,
    )
