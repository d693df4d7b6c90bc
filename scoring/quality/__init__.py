"""Output quality in [0, 1] by task type (docs/scoring.md); one module per type.

An unknown task type scores 0 with the reason in the details.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from protocol.task import Task
from sandbox import SandboxLimits

from . import agent, code, data_transform, rag
from .base import Quality

__all__ = ["Quality", "output_quality"]

_TEXT_SCORERS: dict[str, Callable[[Mapping[str, Any], object], Quality]] = {
    "rag": rag.score,
    "data_transform": data_transform.score,
}


def output_quality(
    task: Task, final_output: dict[str, Any] | None, *, sandbox_limits: SandboxLimits | None = None
) -> Quality:
    """Score ``final_output`` against the task's reference. Only ``code`` runs anything
    (in the sandbox, under ``sandbox_limits``); the other types are pure."""
    if task.task_type == "code":
        return code.score(task.reference, final_output, limits=sandbox_limits)
    if task.task_type == "agent":
        return agent.score(task.reference, final_output, task.instance_inputs)
    scorer = _TEXT_SCORERS.get(task.task_type)
    if scorer is None:
        return Quality.zero(f"unknown task type {task.task_type!r}")
    return scorer(task.reference, final_output)
