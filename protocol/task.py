"""A benchmark task: the task package a miner sees plus the reference only validators read."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .synapse import TaskPackage


class Task(TaskPackage):
    """``reference`` is read by ``task_type`` (docs/scoring.md):

    - ``code`` → ``entry_point`` and ``cases``: ``[{"args": [...], "kwargs": {...}, "expected": <JSON>}]``
    - ``rag`` → ``reference_answer``
    - ``agent`` → ``goal_checklist``: ``[{"type": "keyword"|"regex"|"json_key", ...}]``
    - ``data_transform`` → ``expected_output`` and optional ``output_schema``
    """

    reference: dict[str, Any] = Field(default_factory=dict)
    requires_model: bool = False

    def package(self) -> TaskPackage:
        """The task as sent to miners: everything but the reference."""
        return TaskPackage.model_validate(self.model_dump(exclude={"reference", "requires_model"}))


class TaskSet(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: str
    tasks: list[Task]
