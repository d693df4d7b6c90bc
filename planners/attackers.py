"""Strategies that cheat, so a local network shows them earning nothing.

- ``invalid``: answers every task with a plan whose two nodes wait on each
  other (a cycle). The validator rejects it before running anything.
- ``precompute``: reads the public task families (they ship with the code),
  recognises a family by its description and answers with a one-node plan that
  just emits the reference of the family's public example instance — all a
  cheater can work out in advance. The validator executes a hidden instance
  drawn from its own seed, so the stored answer belongs to inputs it is not using.

And the copier's disguises of another planner's plan (:func:`renamed`, :func:`disguised`):
the same program under other node names, in another order, with another ``max_parallel``,
sent from more hotkeys. Validators group them by their canonical digest and by what they
ran (``scoring.margin.leaders``); the benches and tests send them to show it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from protocol.plan import Edge, PlanNode, WorkflowPlan
from protocol.synapse import TaskPackage
from tasks import Family, load_families

from .base import PlanningError, PlanProposal

__all__ = ["InvalidPlanner", "PrecomputePlanner", "answer_plan", "disguised", "example_answer", "renamed"]


class InvalidPlanner:
    name = "invalid"

    def plan(self, package: TaskPackage) -> PlanProposal:
        subnet = (package.constraints.allowed_subnets or sorted(package.available_tools) or ["sn1"])[0]
        nodes = [
            PlanNode(id=i, subnet=subnet, action="text_transform", params={"op": "upper", "text": i}) for i in "ab"
        ]
        plan = WorkflowPlan(nodes=nodes, edges=[Edge(source="a", to="b"), Edge(source="b", to="a")])
        return PlanProposal(plan, 0.0, 0.0, 1.0, "two nodes that wait on each other")


class PrecomputePlanner:
    name = "precompute"

    def __init__(self, families: Iterable[Family] | None = None) -> None:
        known = load_families() if families is None else families
        self._answers = {f.package.description: example_answer(f.example().reference) for f in known}

    def plan(self, package: TaskPackage) -> PlanProposal:
        answer = self._answers.get(package.description)
        if answer is None:
            raise PlanningError("no precomputed answer for this task: its description matches no public family")
        return PlanProposal(answer_plan(package, answer), 0.0, 0.0, 1.0, "the public example's reference")


def example_answer(reference: dict[str, Any]) -> str:
    """The answer a reference stands for, in the shape a plan's final output takes: the
    text of a rag answer, the JSON of a data object or of an agent's checked keys, or for
    code a function that looks its cases up in a table."""
    if "reference_answer" in reference:
        return str(reference["reference_answer"])
    if "expected_output" in reference:
        return json.dumps(reference["expected_output"])
    if "goal_checklist" in reference:
        keys = {item["key"]: item["equals"] for item in reference["goal_checklist"] if item["type"] == "json_key"}
        return json.dumps(keys)
    table = {json.dumps(case["args"]): case["expected"] for case in reference["cases"]}
    return (
        f"import json\nTABLE = json.loads({json.dumps(json.dumps(table))})\n"
        f"def {reference['entry_point']}(*args):\n    return TABLE.get(json.dumps(list(args)))\n"
    )


def answer_plan(package: TaskPackage, answer: str, *, code: bool | None = None) -> WorkflowPlan:
    """One node that emits ``answer``: as ``artifacts.code`` for a code task (``code``
    defaults to the task type), as text on a text subnet, or as JSON on a data subnet
    when the package allows no text subnet."""
    code = package.task_type == "code" if code is None else code
    text_subnet = _allowed_subnet(package, "text")
    params: dict[str, Any]
    if code:
        action, params = "text_transform", {"op": "extract_code_block", "text": f"```python\n{answer}```\n"}
    elif text_subnet is not None:
        action, params = "text_transform", {"op": "strip", "text": answer}
    else:
        action, params = "json_transform", {"data": _json_or_text(answer), "ops": []}
    subnet = text_subnet or _allowed_subnet(package, "data")
    if subnet is None:
        raise PlanningError("no allowed text or data subnet to emit an answer on")
    node = PlanNode(id="answer", subnet=subnet, action=action, params=params)
    return WorkflowPlan(nodes=[node], output_node="answer")


def _allowed_subnet(package: TaskPackage, kind: str) -> str | None:
    allowed = package.constraints.allowed_subnets
    return next(
        (
            subnet
            for subnet, info in package.available_tools.items()
            if info.type == kind and (allowed is None or subnet in allowed)
        ),
        None,
    )


def _json_or_text(answer: str) -> Any:
    try:
        return json.loads(answer)
    except ValueError:
        return answer


def renamed(plan: WorkflowPlan) -> WorkflowPlan:
    """``plan`` with every node id replaced (``${id…}`` references, edges, the output node and
    the error policies follow): the same program under names it does not use."""
    data = plan.model_dump(mode="json", by_alias=True, exclude_none=True)
    names = {
        node["id"]: f"x{i}_{hashlib.sha256(node['id'].encode()).hexdigest()[:6]}"
        for i, node in enumerate(data["nodes"])
    }
    text = json.dumps(data)
    for old, new in names.items():
        text = text.replace(f"${{{old}.", f"${{{new}.").replace(f"${{{old}}}", f"${{{new}}}")
    data = json.loads(text)
    for node in data["nodes"]:
        node["id"] = names[node["id"]]
    for edge in data["edges"]:
        edge["from"], edge["to"] = names[edge["from"]], names[edge["to"]]
    data["output_node"] = names[data["output_node"]]
    data["error_handling"] = {names[k]: v for k, v in data.get("error_handling", {}).items()}
    return WorkflowPlan.model_validate(data)


def disguised(plan: WorkflowPlan, max_parallel: int | None) -> WorkflowPlan:
    """``plan`` :func:`renamed`, its node list reversed and ``max_parallel`` set (more than
    its nodes: a limit that never binds; 1 or 2: a slower run of the same program)."""
    data = renamed(plan).model_dump(mode="json", by_alias=True, exclude_none=True)
    data["nodes"].reverse()
    data["max_parallel"] = max_parallel
    return WorkflowPlan.model_validate(data)
