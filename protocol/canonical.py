"""A plan's canonical digest: the same program gets the same digest whatever its nodes
are called, in whatever order they are listed, and with nodes its output never reads.

Copies of one plan sent by several hotkeys are one answer (docs/scoring.md, "Copies"):
renaming a node, reordering the node list or adding a node the output does not depend
on must not make a copy new. So a node is named by what it is — its subnet, action,
params (with every DataRef rewritten to the canonical name of the node it reads), its
error policy, touches, ``parallel_safe`` and the canonical names of the nodes it waits
on — hashed bottom-up like a Merkle tree, and the plan by its output node's name, which
covers exactly the nodes the output depends on. Declared cost and latency estimates are
left out: they only raise the budget ceiling and say nothing about the program; so is
``max_parallel``, which schedules the program and does not change it (with calls drawn on
common random numbers, a ``max_parallel`` that never binds changes nothing at all, and one
that binds only delays nodes: the same program, run slower).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from graphlib import CycleError, TopologicalSorter
from typing import Any

from .dataref import DataRefError, find_refs, ref
from .plan import PlanNode, WorkflowPlan

__all__ = ["plan_digest"]


def plan_digest(plan: WorkflowPlan) -> str | None:
    """The hex SHA-256 naming ``plan``'s program, or ``None`` when it has no single
    canonical form (a cycle, a duplicate id, an edge or ref to an unknown node, a
    malformed ref): such a plan is invalid and scores 0 anyway."""
    nodes = {node.id: node for node in plan.nodes}
    if len(nodes) != len(plan.nodes):
        return None
    try:
        needs = {node_id: _needs(node, plan) for node_id, node in nodes.items()}
        if any(dep not in nodes for deps in needs.values() for dep in deps):
            return None
        order = list(TopologicalSorter({node_id: sorted(deps) for node_id, deps in needs.items()}).static_order())
    except (CycleError, DataRefError):
        return None
    names: dict[str, str] = {}
    for node_id in order:
        names[node_id] = _name(nodes[node_id], plan, names)
    roots = [names[plan.output_node]] if plan.output_node in names else sorted(names[s] for s in _sinks(needs))
    return _sha({"output": roots})


def _needs(node: PlanNode, plan: WorkflowPlan) -> set[str]:
    """The ids ``node`` waits on: its incoming edges and the nodes its params read."""
    refs = {r.node_id for r in find_refs(node.params) if not r.is_input}
    return refs | {edge.source for edge in plan.edges if edge.to == node.id}


def _sinks(needs: Mapping[str, set[str]]) -> list[str]:
    read = {dep for deps in needs.values() for dep in deps}
    return [node_id for node_id in needs if node_id not in read]


def _name(node: PlanNode, plan: WorkflowPlan, names: Mapping[str, str]) -> str:
    waits = sorted(names[edge.source] for edge in plan.edges if edge.to == node.id)
    return _sha(
        {
            "subnet": node.subnet,
            "action": node.action,
            "params": _renamed(node.params, names),
            "policy": plan.policy(node.id).model_dump(),
            "touches": sorted(node.touches),
            "parallel_safe": node.parallel_safe,
            "waits": waits,
        }
    )


def _renamed(value: Any, names: Mapping[str, str]) -> Any:
    """``value`` with every node ref pointing at the canonical name of its node."""
    if isinstance(value, dict):
        return {key: _renamed(item, names) for key, item in value.items()}
    if isinstance(value, list):
        return [_renamed(item, names) for item in value]
    if isinstance(value, str) and "${" in value:
        for found in find_refs(value):
            if not found.is_input:
                value = value.replace(found.text, ref("n" + names[found.node_id][:32], *found.path))
    return value


def _sha(content: Any) -> str:
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()
