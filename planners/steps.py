"""Reading a task package the way the reference planners need it.

Both strategies plan from the package's step hints without a model: which steps
reference which (DataRefs in their params), which allowed subnets can run a step
(``ToolInfo.type == step.kind``) and what a node on such a subnet is expected to
cost and take. DataRefs are only *read* here, never resolved: resolution belongs
to the validator, so a miner cannot make its own references say anything
(docs/dataref.md). Both write their plans with the plan builder
(:mod:`protocol.builder`, docs/plan-builder.md), as any miner can.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from protocol.builder import END, PARENT, START, BuildError, Op, OpFactory, graph
from protocol.dataref import INPUT, DataRef, DataRefError, find_refs
from protocol.graph import CycleError, Graph
from protocol.plan import ErrorPolicy, WorkflowPlan
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


@dataclass(frozen=True, slots=True)
class Placement:
    """A step on the option that runs it, estimated for ``attempts`` attempts, with the
    error policy its node declares (None: the validator's default)."""

    step: StepHint
    option: Option
    attempts: int
    policy: ErrorPolicy | None = None


def compile_plan(
    package: TaskPackage, placements: Sequence[Placement], *, chain: bool, max_parallel: int | None = None
) -> WorkflowPlan:
    """The plan that runs every placement, written with :mod:`protocol.builder`.

    Each step becomes an op of its action on its subnet, with the step's id and its
    params as the hint wrote them: ``${input.k}`` is read as ``PARENT["k"]`` and a
    whole-string ref to another step as that op's output, so the builder checks every
    reference against the inputs' schema and the action's declared outputs. Edges
    follow the references; ``chain`` also orders the steps as listed
    (``START >> a >> b >> ...``). The last listed step is the plan's output. Steps are
    built in dependency order, which is the listed order whenever the hints are listed
    so. Raises :class:`PlanningError` with the builder's message when the hints do not
    make a valid plan.
    """
    by_id = {placement.step.id: placement for placement in placements}
    order = step_graph(package, [(src, p.step.id) for p in placements for src in _sources(p.step, set(by_id))])
    try:
        built_first = order.topo_order()
    except CycleError as exc:
        raise PlanningError(f"step DataRefs form a {exc}") from None

    @graph(inputs=package.inputs)
    def steps() -> None:
        built: dict[str, Op] = {}
        for index in built_first:
            placement = by_id[order.ids[index]]
            built[placement.step.id] = _op(placement, built)
        listed = [built[p.step.id] for p in placements]
        if chain:
            functools.reduce(operator.rshift, listed, START)
        listed[-1] >> END

    try:
        return steps.compile(max_parallel=max_parallel)
    except BuildError as exc:
        raise PlanningError(str(exc)) from None


def _op(placement: Placement, built: Mapping[str, Op]) -> Op:
    step, option = placement.step, placement.option
    cost, latency = option.cost(placement.attempts), option.latency(placement.attempts)
    if not math.isfinite(cost + latency):
        raise PlanningError(f"step {step.id!r}: estimates for subnet {option.subnet!r} overflow")
    params = _argument(step.params, step.id, built)
    factory = OpFactory(step.id, step.action, option.subnet, lambda: params, {})
    policy = placement.policy.model_dump(exclude_none=True) if placement.policy is not None else {}
    return factory(id=step.id, estimated_cost=cost, estimated_latency=latency, **policy)


def _argument(value: Any, user: str, built: Mapping[str, Op]) -> Any:
    """A hint's param with each whole-string ref made a builder reference; a ref inside
    a longer string is checked the same way and the string kept as written."""
    if isinstance(value, dict):
        return {key: _argument(item, user, built) for key, item in value.items()}
    if isinstance(value, list):
        return [_argument(item, user, built) for item in value]
    if not isinstance(value, str):
        return value
    refs = find_refs(value)
    readers = [_reference(found, user, built) for found in refs]
    if len(refs) == 1 and refs[0].text == value:
        return readers[0]
    for reader in readers:
        str(reader)  # looks the reference up; a missing one raises BuildError
    return value


def _reference(found: DataRef, user: str, built: Mapping[str, Op]) -> Any:
    """``PARENT[...]`` for an input ref, ``op[...]`` for a ref to a step built before."""
    if found.node_id == INPUT:
        head, *rest = found.path
        return functools.reduce(operator.getitem, rest, PARENT[head])
    source = built.get(found.node_id)
    if source is None:
        raise PlanningError(f"step {user!r} reads {found.text}, which is not the output of a step that runs before it")
    head, *rest = _output_key(found, user)
    return functools.reduce(operator.getitem, rest, source[head])


def _output_key(found: DataRef, user: str) -> list[str]:
    """The builder's key path for a ref's output path: ``text``, ``code`` or a metadata key, then deeper."""
    path = list(found.path)
    if path[:1] == ["text"]:
        return path
    if path[:2] == ["artifacts", "code"]:
        return ["code", *path[2:]]
    if path[:2] == ["artifacts", "metadata"] and len(path) > 2:
        return path[2:]
    raise PlanningError(f"step {user!r} reads {found.text}: not a text, code or metadata output")


def step_graph(package: TaskPackage, edges: Sequence[tuple[str, str]]) -> Graph:
    """The graph over the package's steps (indexed by step order) with ``edges``."""
    index = {step.id: i for i, step in enumerate(package.steps)}
    return Graph([step.id for step in package.steps], [(index[a], index[b]) for a, b in edges])
