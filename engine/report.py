"""The run report (docs/cli.md): one execution as JSON.

:func:`run_report` is the stable machine form printed by ``dagnet run --json``;
scripts depend on its keys. Beyond the required keys it carries ``errors`` (why
an invalid plan never ran) and ``output_node`` (whose output is final).
:mod:`render.report` draws the same dict for people; it never changes it.
"""

from __future__ import annotations

from typing import Any

from .executor import Execution, NodeRecord
from .model import NodeStatus

__all__ = ["run_report"]


def run_report(execution: Execution, *, score: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run-report JSON for ``execution``; ``score`` is included when given."""
    metrics = execution.metrics
    report: dict[str, Any] = {
        "status": execution.status,
        "errors": list(execution.errors),
        "completion_ratio": metrics.completion_ratio,
        "steps_completed": sum(1 for r in execution.nodes.values() if r.status == NodeStatus.SUCCESS),
        "total_steps": execution.total_steps,
        "latency_s": metrics.latency_s,
        "cost_tao": metrics.cost_tao,
        "budget_ceiling": execution.budget_ceiling,
        "retries": metrics.retries,
        "unplanned_retries": metrics.unplanned_retries,
        "timeouts": metrics.timeouts,
        "hard_failures": metrics.hard_failures,
        "tiers": [list(tier) for tier in execution.tiers],
        "critical_path_s": execution.critical_path_s,
        "nodes": {node_id: _node(record) for node_id, record in execution.nodes.items()},
        "output_node": execution.output_node,
        "final_output": execution.final_output,
    }
    if score is not None:
        report["score"] = score
    return report


def _node(record: NodeRecord) -> dict[str, Any]:
    """One node's record; a frame instance adds its ``frame``, a generator its count of
    ``frames``, a frame-scoped node its ``instances`` (each one such record)."""
    node = _fields(record)
    if record.frame is not None:
        node["frame"] = record.frame
    if record.frames is not None:
        node["frames"] = record.frames
    if record.instances:
        node["instances"] = [_node(instance) for instance in record.instances]
    return node


def _fields(record: NodeRecord) -> dict[str, Any]:
    return {
        "status": record.status,
        "reason": record.reason,
        "attempts": record.attempts,
        "cost_tao": record.cost_tao,
        "started_s": record.started_s,
        "finished_s": record.finished_s,
        "attempt_log": [
            {"attempt": n, "started_s": a.started_s, "finished_s": a.finished_s, "error": a.error}
            for n, a in enumerate(record.attempt_log, 1)
        ],
        "output": record.output,
    }
