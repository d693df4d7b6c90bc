"""A task as a validator executes it: the package a miner sees, plus one drawn instance
(the input values ``${input.*}`` binds to, and the reference) that only validators read."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .synapse import TaskPackage


class Task(TaskPackage):
    """``reference`` is read by ``task_type`` (docs/scoring.md):

    - ``code`` → ``entry_point`` and ``cases``: ``[{"args": [...], "kwargs": {...}, "expected": <JSON>}]``
    - ``rag`` → ``reference_answer`` and ``key_facts`` (values the answer must carry)
    - ``agent`` → ``goal_checklist``: ``[{"type": "keyword"|"regex"|"json_key", ...}]``
    - ``data_transform`` → ``expected_output`` and optional ``output_schema``
    """

    reference: dict[str, Any] = Field(default_factory=dict)
    requires_model: bool = False
    instance_inputs: dict[str, Any] = Field(default_factory=dict)
    """The hidden input values of this instance, bound to ``${input.*}`` at execution."""
    seed: int | None = None
    """The seed the instance was drawn from, to replay it."""

    def package(self) -> TaskPackage:
        """The task as sent to miners: everything but the instance."""
        return TaskPackage.model_validate(self.model_dump(exclude=_VALIDATOR_ONLY))


_VALIDATOR_ONLY = {"reference", "requires_model", "instance_inputs", "seed"}


class TaskSet(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: str
    tasks: list[Task]
