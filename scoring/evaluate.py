"""Score one execution of a task: output quality, then the composite (docs/scoring.md).

This is what ``dagnet run --task`` and the validator call, and what re-scores a run
offline from what was saved of it: a run report (``dagnet score``) or an execution
record (the validator's audit), through :func:`saved_metrics`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from protocol.outcomes import RunStatus
from protocol.run_metrics import RunMetrics
from protocol.task import Task
from sandbox import SandboxLimits

from .composite import Score, composite, invalid_score
from .quality import output_quality
from .quality.base import Quality


def score_run(
    task: Task,
    *,
    metrics: RunMetrics,
    final_output: dict[str, Any] | None,
    valid: bool = True,
    sandbox_limits: SandboxLimits | None = None,
) -> Score:
    """The run's score; the details carry the task type and the quality evidence.

    ``valid=False`` (the response or plan was rejected) scores 0 without looking
    at the output; callers with a specific reason use :func:`invalid_score`.
    """
    if not valid:
        return invalid_score("invalid response")
    return score_quality(
        task, metrics=metrics, quality=output_quality(task, final_output, sandbox_limits=sandbox_limits)
    )


def score_quality(task: Task, *, metrics: RunMetrics, quality: Quality) -> Score:
    """The run's score once its output's ``quality`` is known: the composite, with the
    task type and the quality evidence in the details."""
    score = composite(
        output_quality=quality.value,
        metrics=metrics,
        max_budget_tao=task.constraints.max_budget_tao,
        max_latency_seconds=task.constraints.max_latency_seconds,
    )
    details = {**score.details, "task_type": task.task_type, "quality": quality.details}
    return score.model_copy(update={"details": details})


_KINDS: dict[object, type] = {"float": float, "int": int}  # keyed by a dataclass field's type: a string here
_METRIC_KINDS = {f.name: _KINDS[f.type] for f in dataclasses.fields(RunMetrics)}


def saved_metrics(saved: Any) -> RunMetrics:
    """The metrics of a saved run (a run report, a record's metrics summary); raises
    ``ValueError`` naming the field that is missing or not a number."""
    if not isinstance(saved, Mapping):
        raise ValueError(f"not a run report: expected a JSON object, got {type(saved).__name__}")
    values = {}
    for field, kind in _METRIC_KINDS.items():
        if field not in saved:
            raise ValueError(f"not a run report: missing {field!r}")
        try:
            values[field] = kind(saved[field])
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"not a run report: {field!r} is not a number") from None
    return RunMetrics(**values)


def score_report(report: Mapping[str, Any], task: Task) -> Score:
    """Score a saved run report against ``task`` exactly as ``dagnet run --task`` did."""
    metrics = saved_metrics(report)
    if report.get("status") == RunStatus.INVALID:
        return invalid_score("invalid plan")
    return score_run(task, metrics=metrics, final_output=report.get("final_output"))
