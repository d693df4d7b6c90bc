"""Static checks of a workflow plan, decided before anything runs (docs/execution.md, static checks).

Two kinds of finding:

- *errors* make the whole plan invalid: it never runs and scores 0 (empty plan,
  limits, duplicate ids, dangling edges, self loops, no roots, cycles, params too
  deep, disallowed subnets, error_handling/output_node naming unknown nodes);
- *node errors* block one node statically: a DataRef with bad syntax, or naming a
  node that is not an ancestor through edges. The rest of the plan still runs.

:func:`check_plan` collects every finding it can instead of stopping at the first,
and never raises on a :class:`~protocol.plan.WorkflowPlan`. It only stops early
when the plan is over the node or edge limit, so an oversized plan costs nothing.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field

from .dataref import CompiledParams, DataRefError, ParamsTooDeep, compile_params
from .graph import CycleError, Graph
from .limits import DEFAULT_LIMITS, Limits
from .plan import NODE_ID_PATTERN, WorkflowPlan

__all__ = ["NO_ROOTS", "PlanCheck", "check_plan"]

NO_ROOTS = "graph has no roots — cycle or malformed deps"

_NODE_ID = re.compile(NODE_ID_PATTERN)
_NAME_MAX = 64


@dataclass
class PlanCheck:
    """What :func:`check_plan` found; ``graph`` and ``tiers`` exist only for sound graphs."""

    errors: list[str] = field(default_factory=list)
    node_errors: dict[str, str] = field(default_factory=dict)
    graph: Graph | None = None
    compiled: dict[str, CompiledParams] = field(default_factory=dict)
    tiers: list[list[str]] = field(default_factory=list)
    critical_path_s: float = 0.0

    @property
    def valid(self) -> bool:
        """No finding at all: what ``dagnet plan check`` reports."""
        return not self.errors and not self.node_errors

    @property
    def runnable(self) -> bool:
        """No fatal error: the executor runs it, blocking the nodes in ``node_errors``."""
        return not self.errors


def check_plan(
    plan: WorkflowPlan,
    *,
    limits: Limits = DEFAULT_LIMITS,
    allowed_subnets: Collection[str] | None = None,
) -> PlanCheck:
    """Check ``plan`` statically; ``allowed_subnets=None`` allows every subnet."""
    check = PlanCheck()
    check.errors = _size_errors(plan, limits)
    if check.errors:
        return check
    check.errors += _structure_errors(plan)
    graph_sound = not check.errors
    check.errors += _reference_errors(plan)
    check.errors += _node_errors(plan, check, limits, allowed_subnets)
    if graph_sound:
        _check_graph(plan, check)
    return check


def _name(text: str) -> str:
    """A peer-supplied id, quoted and truncated unless it is a well-formed node id."""
    if _NODE_ID.match(text):
        return text
    return repr(text if len(text) <= _NAME_MAX else text[:_NAME_MAX] + "...")


def _size_errors(plan: WorkflowPlan, limits: Limits) -> list[str]:
    if not plan.nodes:
        return ["plan has no nodes"]
    errors = []
    if len(plan.nodes) > limits.max_nodes:
        errors.append(f"too many nodes: {len(plan.nodes)} > {limits.max_nodes}")
    if len(plan.edges) > limits.max_edges:
        errors.append(f"too many edges: {len(plan.edges)} > {limits.max_edges}")
    return errors


def _structure_errors(plan: WorkflowPlan) -> list[str]:
    """Duplicate ids, dangling edges and self loops: without these a graph can be built."""
    errors = []
    ids: set[str] = set()
    duplicates: dict[str, None] = {}
    for node in plan.nodes:
        if node.id in ids:
            duplicates[node.id] = None
        ids.add(node.id)
    errors += [f"duplicate node id: {_name(node_id)}" for node_id in duplicates]
    for i, edge in enumerate(plan.edges):
        label = f"edge {i} ({_name(edge.source)} -> {_name(edge.to)})"
        unknown = [end for end in dict.fromkeys((edge.source, edge.to)) if end not in ids]
        errors += [f"{label}: unknown node {_name(end)}" for end in unknown]
        if not unknown and edge.source == edge.to:
            errors.append(f"{label}: self loop")
    return errors


def _reference_errors(plan: WorkflowPlan) -> list[str]:
    ids = {node.id for node in plan.nodes}
    errors = [
        f"error_handling: unknown node {_name(node_id)}"
        for node_id in plan.error_handling
        if node_id not in ids
    ]
    if plan.output_node is not None and plan.output_node not in ids:
        errors.append(f"output_node: unknown node {_name(plan.output_node)}")
    return errors


def _node_errors(
    plan: WorkflowPlan, check: PlanCheck, limits: Limits, allowed: Collection[str] | None
) -> list[str]:
    """Per-node subnet and params checks; fills ``check.compiled`` / ``check.node_errors``."""
    errors = []
    allowed_set = None if allowed is None else set(allowed)
    for node in plan.nodes:
        if allowed_set is not None and node.subnet not in allowed_set:
            errors.append(f"node {node.id}: disallowed subnet {_name(node.subnet)}")
        try:
            compiled = compile_params(node.params, max_depth=limits.max_param_depth)
        except ParamsTooDeep:
            errors.append(f"node {node.id}: params nested deeper than {limits.max_param_depth} levels")
        except DataRefError as exc:
            check.node_errors.setdefault(node.id, f"bad_dataref:{exc}")
        else:
            check.compiled.setdefault(node.id, compiled)
    return errors


def _check_graph(plan: WorkflowPlan, check: PlanCheck) -> None:
    """Roots, cycles, then DataRef ancestry, tiers and critical path of a sound graph."""
    graph = Graph.from_plan(plan)
    if not graph.roots():
        check.errors.append(NO_ROOTS)
    try:
        graph.topo_order()
    except CycleError as exc:
        check.errors.append(str(exc))
        return
    check.graph = graph
    check.tiers = graph.tiers()
    check.critical_path_s = graph.critical_path([node.estimated_latency for node in plan.nodes])
    for node_id, compiled in list(check.compiled.items()):
        source = _first_non_ancestor(graph, graph.index[node_id], compiled)
        if source is not None:
            check.node_errors[node_id] = f"dataref_not_upstream:{source}"
            del check.compiled[node_id]


def _first_non_ancestor(graph: Graph, v: int, compiled: CompiledParams) -> str | None:
    """The first referenced node (in order of appearance) that is not an ancestor of ``v``."""
    if not compiled.refs:
        return None
    direct = set(graph.preds[v])  # the common case, answered without ancestor bitsets
    for ref in compiled.refs:
        src = graph.index.get(ref.node_id)
        if src is None or (src not in direct and not graph.is_ancestor(src, v)):
            return ref.node_id
    return None
