"""Strategies that cheat, so a local network shows them earning nothing.

- ``invalid``: answers every task with a plan whose two nodes wait on each
  other (a cycle). The validator rejects it before running anything.
- ``precompute``: reads the published benchmark task set (references
  included: a validator needs them, so they ship with the code), recognises a
  task by its public description and answers with a one-node plan that just
  emits the stored reference — no work, nearly no cost, and right if the task
  never changed. Against hidden instances the stored reference belongs to inputs
  the validator is no longer using.
"""

from __future__ import annotations

import json
from pathlib import Path

from protocol.plan import Edge, PlanNode, WorkflowPlan
from protocol.synapse import TaskPackage
from protocol.task import Task, TaskSet

from .base import PlanningError, PlanProposal

PUBLISHED_TASKS = Path(__file__).resolve().parents[2] / "benchmarks" / "v1.json"


class InvalidPlanner:
    name = "invalid"

    def plan(self, package: TaskPackage) -> PlanProposal:
        subnet = (package.constraints.allowed_subnets or sorted(package.available_tools) or ["sn1"])[0]
        nodes = [PlanNode(id=i, subnet=subnet, action="text_transform", params={"op": "upper", "text": i}) for i in "ab"]
        plan = WorkflowPlan(nodes=nodes, edges=[Edge(source="a", to="b"), Edge(source="b", to="a")])
        return PlanProposal(plan, 0.0, 0.0, 1.0, "two nodes that wait on each other")


class PrecomputePlanner:
    name = "precompute"

    def __init__(self, published: Path = PUBLISHED_TASKS) -> None:
        tasks = TaskSet.model_validate_json(published.read_bytes()).tasks
        self._answers = {task.description: _stored_answer(task) for task in tasks}

    def plan(self, package: TaskPackage) -> PlanProposal:
        answer = self._answers.get(package.description)
        if answer is None:
            raise PlanningError("no stored answer for this task")
        params = {"op": "strip", "text": answer}
        node = PlanNode(id="answer", subnet=_text_subnet(package), action="text_transform", params=params)
        return PlanProposal(WorkflowPlan(nodes=[node], output_node="answer"), 0.0, 0.0, 1.0, "a stored answer")


def _stored_answer(task: Task) -> str:
    reference = task.reference
    if "reference_answer" in reference:
        return str(reference["reference_answer"])
    if "expected_output" in reference:
        return json.dumps(reference["expected_output"], sort_keys=True)
    if "goal_checklist" in reference:
        return " ".join(str(item.get("text", "")) for item in reference["goal_checklist"])
    return ""


def _text_subnet(package: TaskPackage) -> str:
    allowed = package.constraints.allowed_subnets
    for subnet, info in package.available_tools.items():
        if info.type == "text" and (allowed is None or subnet in allowed):
            return subnet
    raise PlanningError("no allowed text subnet to emit a stored answer on")
