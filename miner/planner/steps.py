"""Reading a task package the way the reference planners need it.

Both strategies plan from the package's step hints without a model: which steps
reference which (DataRefs in their params), which allowed subnets can run a step
(``ToolInfo.type == step.kind``) and what a node on such a subnet is expected to
cost and take. DataRefs are only *read* here, never resolved: resolution belongs
to the validator, so a miner cannot make its own references say anything
(docs/dataref.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from protocol.dataref import DataRefError, find_refs
from protocol.graph import Graph
from protocol.plan import PlanNode, WorkflowPlan
from protocol.synapse import StepHint, TaskPackage, ToolInfo

from .base import PlanningError


@dataclass(frozen=True, slots=True)
class Option:
    """An allowed subnet that can run a step, as the task lists it.

    ``top_k`` comes from the routing policy: the node is sent to that many
    providers, is as slow as the slowest and costs the sum.
    """

    subnet: str
    info: ToolInfo
    position: int  # index in the task's ``available_tools`` listing
    top_k: int

    def cost(self, attempts: int) -> float:
        return self.info.avg_cost * self.top_k * attempts

    def latency(self, attempts: int) -> float:
        return self.info.avg_latency * attempts


def read_steps(package: TaskPackage) -> list[tuple[str, ...]]:
    """For each step, the ids of the *other* steps its params reference, in order.

    Refs naming no step (or the step itself) are left to the validator, which
    blocks such a node; they make no edge. Raises :class:`PlanningError` when the
    package has no steps, repeats a step id or holds malformed DataRef syntax.
    """
    if not package.steps:
        raise PlanningError("task has no steps: the reference planners plan from step hints")
    known: set[str] = set()
    for step in package.steps:
        if step.id in known:
            raise PlanningError(f"duplicate step id {step.id!r}")
        known.add(step.id)
    return [_sources(step, known) for step in package.steps]


def _sources(step: StepHint, known: set[str]) -> tuple[str, ...]:
    try:
        refs = find_refs(step.params)
    except DataRefError as exc:
        raise PlanningError(f"step {step.id!r}: {exc}") from None
    named = (ref.node_id for ref in refs)
    return tuple(dict.fromkeys(n for n in named if n in known and n != step.id))


def options(package: TaskPackage, step: StepHint) -> list[Option]:
    """Allowed subnets offering ``step.kind``, in the task's listing order."""
    allowed = package.constraints.allowed_subnets
    found = [
        Option(subnet, info, position, package.route(subnet).top_k)
        for position, (subnet, info) in enumerate(package.available_tools.items())
        if info.type == step.kind and (allowed is None or subnet in allowed)
    ]
    if not found:
        raise PlanningError(f"step {step.id!r}: no allowed subnet offers kind {step.kind!r}")
    return found


def plan_node(step: StepHint, option: Option, attempts: int) -> PlanNode:
    """The node running ``step`` on ``option``, estimated for ``attempts`` attempts.

    Params are copied as they are, DataRefs included.
    """
    cost, latency = option.cost(attempts), option.latency(attempts)
    if not math.isfinite(cost + latency):
        raise PlanningError(f"step {step.id!r}: estimates for subnet {option.subnet!r} overflow")
    return PlanNode(
        id=step.id,
        subnet=option.subnet,
        action=step.action,
        params=step.params,
        estimated_cost=cost,
        estimated_latency=latency,
    )


def step_graph(package: TaskPackage, edges: Sequence[tuple[str, str]]) -> Graph:
    """The graph over the package's steps (indexed by step order) with ``edges``."""
    index = {step.id: i for i, step in enumerate(package.steps)}
    return Graph([step.id for step in package.steps], [(index[a], index[b]) for a, b in edges])


def estimate(plan: WorkflowPlan, graph: Graph) -> tuple[float, float]:
    """Total estimated cost and latency from the nodes' estimates.

    The latency is the critical path, which is what a dependency-driven executor
    takes when every node meets its estimate.
    """
    latencies = [node.estimated_latency for node in plan.nodes]
    cost, latency = plan.estimated_cost(), graph.critical_path(latencies)
    if not math.isfinite(cost + latency):
        raise PlanningError("the plan's total estimates overflow")
    return cost, latency
