"""Plans written in a line for tests: ``plan(node("a"), node("b", text="${a.output.text}"), edges="a>b")``."""

from __future__ import annotations

from typing import Any

from protocol.plan import WorkflowPlan

NODE_FIELDS = ("estimated_cost", "estimated_latency", "touches", "parallel_safe")
"""Keywords of :func:`node` that set the node's own fields; every other keyword is a param."""


def node(node_id: str, action: str = "echo", *, subnet: str = "sn1", **params: Any) -> dict:
    """A plan node as JSON; ``params`` are the action's params (for ``echo``, a script for a test's runner)."""
    fields = {k: params.pop(k) for k in NODE_FIELDS if k in params}
    return {"id": node_id, "subnet": subnet, "action": action, "params": params, **fields}


def plan(*nodes: dict, edges: str = "", **fields: Any) -> WorkflowPlan:
    """A plan of ``nodes``; ``edges`` is space-separated ``src>dst`` pairs, ``fields`` the plan's other fields."""
    pairs = [pair.split(">") for pair in edges.split()]
    return WorkflowPlan.model_validate(
        {"nodes": list(nodes), "edges": [{"from": a, "to": b} for a, b in pairs], **fields}
    )
