"""What a planner is: a strategy that turns a task package into a workflow plan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from protocol.plan import WorkflowPlan
from protocol.synapse import SCORING_VERSION, TaskPackage, WorkflowSynapse


class PlanningError(ValueError):
    """The package cannot be planned without a model (no steps, no subnet of a kind,
    steps whose DataRefs form a cycle...). The message says what is missing."""


@dataclass(frozen=True)
class PlanProposal:
    """A plan and the miner fields that go with it in a ``WorkflowSynapse`` answer."""

    plan: WorkflowPlan
    total_estimated_cost: float
    total_estimated_latency: float
    confidence: float
    reasoning: str

    def answer(self, package: TaskPackage, miner_uid: int) -> WorkflowSynapse:
        """The ``WorkflowSynapse`` response: ``package`` with every miner field filled."""
        if not isinstance(package, WorkflowSynapse):
            package = WorkflowSynapse.model_validate(package.model_dump())
        return package.model_copy(
            update={
                "miner_uid": miner_uid,
                "scoring_version": SCORING_VERSION,
                "workflow_plan": self.plan,
                "total_estimated_cost": self.total_estimated_cost,
                "total_estimated_latency": self.total_estimated_latency,
                "confidence": self.confidence,
                "reasoning": self.reasoning,
            }
        )


class Planner(Protocol):
    name: str

    def plan(self, package: TaskPackage) -> PlanProposal:
        """Design a plan for ``package``; raises :class:`PlanningError` when it cannot."""
        ...
