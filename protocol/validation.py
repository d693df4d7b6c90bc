"""Static checks of a workflow plan, decided before anything runs (docs/execution.md, static checks).

Two kinds of finding:

- *errors* make the whole plan invalid: it never runs and scores 0 (empty plan,
  limits, duplicate or reserved ids, dangling edges, self loops, no roots, cycles,
  params too deep, disallowed subnets, unknown actions or actions the subnet's type
  does not offer, error_handling/output_node naming unknown nodes);
- *node errors* block one node statically: a DataRef with bad syntax, naming a
  node that is not an ancestor through edges, an output its action does not
  declare, or an input the task's input schema does not declare, and frame
  scopes :mod:`protocol.frames` refuses. The rest of the plan still runs.

:func:`check_plan` collects every finding it can instead of stopping at the first,
and never raises on a :class:`~protocol.plan.WorkflowPlan`. It only stops early
when the plan is over the node or edge limit, so an oversized plan costs nothing.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from .actions import admission_error, undeclared_output
from .dataref import INPUT, CompiledParams, DataRef, DataRefError, ParamsTooDeep, compile_params
from .frames import FrameScopes, frame_scopes
from .graph import CycleError, Graph
from .limits import DEFAULT_LIMITS, Limits
from .plan import NODE_ID_PATTERN, WorkflowPlan
from .synapse import TaskPackage, ToolInfo

__all__ = ["NO_ROOTS", "PlanCheck", "check_plan", "check_plan_for"]

NO_ROOTS = "graph has no roots — cycle or malformed deps"

_NODE_ID = re.compile(NODE_ID_PATTERN)
_NAME_MAX = 64


@dataclass
class PlanCheck:
    """What :func:`check_plan` found; ``graph``, ``tiers`` and ``frames`` exist only for sound graphs."""

    errors: list[str] = field(default_factory=list)
    node_errors: dict[str, str] = field(default_factory=dict)
    graph: Graph | None = None
    compiled: dict[str, CompiledParams] = field(default_factory=dict)
    frames: FrameScopes = field(default_factory=FrameScopes)
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
    tools: Mapping[str, ToolInfo] | None = None,
    input_schema: Mapping[str, Any] | None = None,
) -> PlanCheck:
    """Check ``plan`` statically.

    ``allowed_subnets=None`` allows every subnet. ``tools`` (a task's
    ``available_tools``) gives each subnet its type, so an action the type does not
    offer is an error; without it only unknown actions are. ``input_schema`` (a
    task's ``inputs``) declares what ``${input.*}`` may name; without it input refs
    are not checked.
    """
    check = PlanCheck()
    check.errors = _size_errors(plan, limits)
    if check.errors:
        return check
    check.errors += _structure_errors(plan)
    graph_sound = not check.errors
    check.errors += _reference_errors(plan)
    check.errors += _node_errors(plan, check, limits, allowed_subnets)
    check.errors += _admission_errors(plan, tools)
    _check_refs(plan, check, input_schema)
    if graph_sound:
        _check_graph(plan, check)
    return check


def check_plan_for(plan: WorkflowPlan, package: TaskPackage, *, limits: Limits = DEFAULT_LIMITS) -> PlanCheck:
    """:func:`check_plan` under everything ``package`` says about a plan for it."""
    return check_plan(
        plan,
        limits=limits,
        allowed_subnets=package.constraints.allowed_subnets,
        tools=package.available_tools or None,
        input_schema=package.inputs,
    )


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
    if INPUT in ids:
        errors.append(f"node id {INPUT!r} is reserved for the task's inputs")
    for i, edge in enumerate(plan.edges):
        label = f"edge {i} ({_name(edge.source)} -> {_name(edge.to)})"
        unknown = [end for end in dict.fromkeys((edge.source, edge.to)) if end not in ids]
        errors += [f"{label}: unknown node {_name(end)}" for end in unknown]
        if not unknown and edge.source == edge.to:
            errors.append(f"{label}: self loop")
    return errors


def _reference_errors(plan: WorkflowPlan) -> list[str]:
    ids = {node.id for node in plan.nodes}
    errors = [f"error_handling: unknown node {_name(node_id)}" for node_id in plan.error_handling if node_id not in ids]
    if plan.output_node is not None and plan.output_node not in ids:
        errors.append(f"output_node: unknown node {_name(plan.output_node)}")
    return errors


def _node_errors(plan: WorkflowPlan, check: PlanCheck, limits: Limits, allowed: Collection[str] | None) -> list[str]:
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


def _admission_errors(plan: WorkflowPlan, tools: Mapping[str, ToolInfo] | None) -> list[str]:
    """Unknown actions; with ``tools``, subnets it does not list and actions their type does not offer."""
    errors = []
    for node in plan.nodes:
        if tools is not None and node.subnet not in tools:
            errors.append(f"node {node.id}: subnet {_name(node.subnet)} is not among the task's tools")
            continue
        subnet_type = tools[node.subnet].type if tools is not None else None
        reason = admission_error(node.action, _name(node.subnet), subnet_type)
        if reason is not None:
            errors.append(f"node {node.id}: {reason}")
    return errors


def _check_refs(plan: WorkflowPlan, check: PlanCheck, input_schema: Mapping[str, Any] | None) -> None:
    """Block nodes whose refs name an undeclared output or (given a schema) an undeclared input."""
    actions = {node.id: node.action for node in plan.nodes}
    for node_id, compiled in list(check.compiled.items()):
        for ref in compiled.refs:
            reason = _ref_problem(ref, actions, input_schema)
            if reason is not None:
                check.node_errors[node_id] = reason
                del check.compiled[node_id]
                break


def _ref_problem(ref: DataRef, actions: Mapping[str, str], input_schema: Mapping[str, Any] | None) -> str | None:
    if ref.is_input:
        if input_schema is not None and not _declared(input_schema, ref.path):
            return f"undeclared_input:{ref.text}"
        return None
    action = actions.get(ref.node_id)
    if action is not None and undeclared_output(action, ref.path):
        return f"undeclared_output:{ref.text}"
    return None


def _declared(schema: Mapping[str, Any], path: tuple[str, ...]) -> bool:
    """Whether the JSON Schema ``schema`` declares ``path``: each segment a listed
    property, an index into an array with ``items``, or a key allowed by an
    ``additionalProperties`` schema."""
    node: Any = schema
    for segment in path:
        if not isinstance(node, Mapping):
            return False
        properties = node.get("properties")
        if isinstance(properties, Mapping) and segment in properties:
            node = properties[segment]
        elif segment.isdecimal() and isinstance(node.get("items"), Mapping):
            node = node["items"]
        elif isinstance(node.get("additionalProperties"), Mapping):
            node = node["additionalProperties"]
        else:
            return False
    return True


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
    check.frames, refused = frame_scopes(graph, [node.action for node in plan.nodes], check.compiled)
    for node_id, reason in refused.items():
        check.node_errors[node_id] = reason
        del check.compiled[node_id]


def _first_non_ancestor(graph: Graph, v: int, compiled: CompiledParams) -> str | None:
    """The first referenced node (in order of appearance) that is not an ancestor of ``v``."""
    if not compiled.refs:
        return None
    direct = set(graph.preds[v])  # the common case, answered without ancestor bitsets
    for ref in compiled.refs:
        if ref.is_input:
            continue
        src = graph.index.get(ref.node_id)
        if src is None or (src not in direct and not graph.is_ancestor(src, v)):
            return ref.node_id
    return None
