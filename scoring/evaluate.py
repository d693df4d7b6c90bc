"""Score one execution of a task: output quality, then the composite (docs/scoring.md).

This is what ``dagnet run --task`` and the validator call.
"""

from __future__ import annotations

from typing import Any

from protocol.metrics import RunMetrics
from protocol.task import Task
from sandbox import SandboxLimits

from .composite import Score, composite, invalid_score
from .quality import output_quality


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
    quality = output_quality(task, final_output, sandbox_limits=sandbox_limits)
    score = composite(
        output_quality=quality.value,
        metrics=metrics,
        max_budget_tao=task.constraints.max_budget_tao,
        max_latency_seconds=task.constraints.max_latency_seconds,
    )
    details = {**score.details, "task_type": task.task_type, "quality": quality.details}
    return score.model_copy(update={"details": details})
