"""Import of the task-list DAG format into a workflow plan (docs/protocol.md).

The format comes from an earlier multi-agent planner ("seed 004" among the designs
dagnet grew from). A document is ``{"dag": [{"id", "tool", "query", "dependencies"}, ...]}``
where ``query`` may hold ``{{task_id.result}}`` (the task's text output) or
``{{task_id.field}}`` (a field of its ``artifacts.metadata``; dotted fields nest).
Each task becomes a node whose ``action`` is the tool (after aliasing), whose params
are ``{"query": ...}`` with templates rewritten to DataRefs, and whose dependencies
become edges. Literal ``${`` in a query is escaped as ``$${`` so it stays literal.

Graph rules (duplicate ids, cycles) are left to :func:`protocol.validation.check_plan`;
this module rejects only what cannot be converted at all.
"""

from __future__ import annotations

import re
from typing import Any

from .plan import NODE_ID, NODE_ID_PATTERN, Edge, PlanNode, WorkflowPlan

__all__ = ["TOOL_ALIASES", "import_seed004", "is_seed004"]

TOOL_ALIASES = {"serper_web_search": "search", "web_search": "search"}

_TEMPLATE = re.compile(r"\{\{\s*(" + NODE_ID + r")\.([A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*)\s*\}\}")
_NODE_ID = re.compile(NODE_ID_PATTERN)
_TOOL_MAX = 128
_TASK_KEYS = {"id": str, "tool": str, "query": str, "dependencies": list}


def is_seed004(doc: Any) -> bool:
    """Whether ``doc`` looks like a task-list document (an object with a ``dag`` key)."""
    return isinstance(doc, dict) and "dag" in doc and "nodes" not in doc


def import_seed004(doc: dict[str, Any], *, subnet: str = "local") -> WorkflowPlan:
    """Convert a task-list document; raises ``ValueError`` naming the offending field."""
    tasks = doc.get("dag") if isinstance(doc, dict) else None
    if not isinstance(tasks, list):
        raise ValueError("dag: expected a list of tasks")
    nodes: list[PlanNode] = []
    edges: list[Edge] = []
    known = {task.get("id") for task in tasks if isinstance(task, dict)}
    for i, task in enumerate(tasks):
        where = f"dag[{i}]"
        _check_task(task, where, known)
        nodes.append(_node(task, where, subnet))
        deps = dict.fromkeys(task["dependencies"])
        edges += [Edge(source=dep, to=task["id"]) for dep in deps]
    return WorkflowPlan(nodes=nodes, edges=edges)


def _check_task(task: Any, where: str, known: set[Any]) -> None:
    if not isinstance(task, dict):
        raise ValueError(f"{where}: expected an object")
    for key, kind in _TASK_KEYS.items():
        if key not in task:
            raise ValueError(f"{where}.{key}: missing")
        if not isinstance(task[key], kind):
            raise ValueError(f"{where}.{key}: expected {kind.__name__}, got {type(task[key]).__name__}")
    if not _NODE_ID.match(task["id"]):
        raise ValueError(f"{where}.id: {task['id'][:80]!r} must match {NODE_ID_PATTERN}")
    if not 1 <= len(task["tool"]) <= _TOOL_MAX:
        raise ValueError(f"{where}.tool: must be 1 to {_TOOL_MAX} characters")
    for j, dep in enumerate(task["dependencies"]):
        if not isinstance(dep, str):
            raise ValueError(f"{where}.dependencies[{j}]: expected str, got {type(dep).__name__}")
        if dep not in known:
            raise ValueError(f"{where}.dependencies[{j}]: unknown task id {dep[:80]!r}")


def _node(task: dict[str, Any], where: str, subnet: str) -> PlanNode:
    query = _convert_query(task["query"], set(task["dependencies"]), where)
    action = TOOL_ALIASES.get(task["tool"], task["tool"])
    return PlanNode(id=task["id"], subnet=subnet, action=action, params={"query": query})


def _convert_query(query: str, deps: set[str], where: str) -> str:
    """Rewrite templates to DataRefs, escaping literal ``${`` in the text between them."""
    pieces: list[str] = []
    pos = 0
    for match in _TEMPLATE.finditer(query):
        task_id, field_path = match.groups()
        if task_id not in deps:
            raise ValueError(f"{where}.query: template {match.group()!r} names {task_id!r}, not in dependencies")
        literal = query[pos : match.start()]
        if literal.endswith("$"):
            # "$" + "${ref}" would read as the escape "$${": not expressible as a DataRef.
            raise ValueError(f"{where}.query: '$' directly before {match.group()!r} is not supported")
        pieces.append(literal.replace("${", "$${"))
        pieces.append(_dataref(task_id, field_path))
        pos = match.end()
    pieces.append(query[pos:].replace("${", "$${"))
    return "".join(pieces)


def _dataref(task_id: str, field_path: str) -> str:
    if field_path == "result":
        return f"${{{task_id}.output.text}}"
    return f"${{{task_id}.output.artifacts.metadata.{field_path}}}"
