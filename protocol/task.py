"""A task as a validator executes it: the package a miner sees, plus one drawn instance
(the input values ``${input.*}`` binds to, and the reference) that only validators read."""

from __future__ import annotations

import hashlib
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from .hints import TIERS, HintTier
from .synapse import Constraints, TaskPackage

SYNTHETIC_PREFIX = "syn_"
SYNTHETIC_TIGHTEN = 0.8
"""A synthetic variant keeps this fraction of the original budget and latency."""

P = TypeVar("P", bound=TaskPackage)


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
    holdings: dict[str, Any] = Field(default_factory=dict)
    """Data the task's subnets hold for this instance, by the ids its inputs name: only a
    node on a subnet whose type reads held data gets it (docs/tasks.md, "Held data")."""

    def package(self) -> TaskPackage:
        """The task as sent to miners: everything but the instance."""
        return TaskPackage.model_validate(self.model_dump(exclude=_VALIDATOR_ONLY))


_VALIDATOR_ONLY = {"reference", "requires_model", "instance_inputs", "seed", "holdings"}


def synthetic_variant(package: P, seed: int) -> P:
    """A fresh-looking copy of ``package`` (a task or a family's package) that a miner
    cannot look up by id: the id becomes ``syn_<8 hex>`` of the original id and
    ``seed`` (stable for a draw, opaque to miners), budget and latency are tightened by
    :data:`SYNTHETIC_TIGHTEN`; everything else, the reference included, is unchanged."""
    tag = hashlib.sha256(f"{package.task_id}:{seed}".encode()).hexdigest()[:8]
    limits = package.constraints
    constraints = Constraints(
        max_budget_tao=None if limits.max_budget_tao is None else limits.max_budget_tao * SYNTHETIC_TIGHTEN,
        max_latency_seconds=limits.max_latency_seconds * SYNTHETIC_TIGHTEN,
        allowed_subnets=limits.allowed_subnets,
    )
    return package.model_copy(update={"task_id": f"{SYNTHETIC_PREFIX}{tag}", "constraints": constraints}, deep=True)


def at_tier(package: P, tier: HintTier) -> P:
    """``package`` (a family's full package or a task) as sent at hint ``tier``
    (:mod:`protocol.hints`): the steps kept, reduced to an outline, or left out."""
    if tier == "full":
        steps = list(package.steps)
    elif tier == "outline":
        steps = [step.model_copy(update={"id": f"s{i}", "params": {}}) for i, step in enumerate(package.steps, 1)]
    elif tier == "goal":
        steps = []
    else:
        raise ValueError(f"unknown hint tier {tier!r}; known: {', '.join(TIERS)}")
    return package.model_copy(update={"steps": steps, "hint_tier": tier})


class TaskSet(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: str
    tasks: list[Task]
