"""Node state: one :class:`_Node` per plan node (graphlib's ``_NodeInfo`` with time
added) and, for frames, one per frame instance; each is also the :class:`NodeRecord`
the run report keeps of it. :func:`build_nodes` makes them from a checked plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from protocol.actions import ACTIONS
from protocol.plan import WorkflowPlan
from protocol.validation import PlanCheck

from .model import BLOCKED, PENDING, SUCCESS, ExecutorConfig, NodeRecord, NodeStatus

__all__ = ["_FramedNode", "_Node", "build_nodes", "scoped_outcome"]

_NO_OUTPUTS: dict[str, dict[str, Any]] = {}


class _Node(NodeRecord):
    """One node's state during a run, and the :class:`NodeRecord` the report keeps of it:
    one slotted object per node, whose record fields fill in as the node runs (so
    settling a run builds no second object per node)."""

    __slots__ = (
        # Fixed for the run.
        "index",
        "id",
        "subnet",
        "action",
        "estimate",
        "max_attempts",
        "timeout",
        "sources",
        # What the node holds of the budget while in flight (see _Budget.reserve).
        "held",
        # Resolved at dispatch when the node holds refs (None until then).
        "params",
    )

    # A plain node plays no part in frames; a _FramedNode has these as its own slots.
    emits = False
    emitted: list[dict[str, Any]] | None = None
    frame_error: str | None = None
    generator: _Node | None = None
    gathers = False
    per_frame: list[_Node] | None = None

    def __init__(self, index: int, node_id: str, subnet: str, action: str, estimate: float, timeout: float) -> None:
        self.index = index
        self.id = node_id
        self.subnet = subnet
        self.action = action
        self.estimate = estimate
        self.max_attempts = 1
        self.timeout = timeout
        self.sources: tuple[_Node, ...] = ()  # referenced nodes, in order of first reference
        self.held = 0.0
        self.params: dict[str, Any] | None = None
        # The record; times are seconds from the start of execution.
        self.status = PENDING
        self.reason = None
        self.attempts = 0
        self.cost_tao = 0.0
        self.started_s = None
        self.finished_s = None
        self.output = None
        self.timeouts = 0
        self.unplanned_retries = 0
        self.retried = ()
        self.last_started_s = None
        self.frame = None
        self.frames = None
        self.instances = ()

    @property
    def label(self) -> str:
        """The node's id, with ``[frame]`` for an instance: how reasons name it."""
        return self.id if self.frame is None else f"{self.id}[{self.frame}]"

    def instance(self, frame: int, index: int) -> _FramedNode:
        """This frame-scoped node's instance on ``frame``: same action, policy and refs."""
        inst = _FramedNode(index, self.id, self.subnet, self.action, self.estimate, self.timeout)
        inst.max_attempts = self.max_attempts
        inst.sources = self.sources
        inst.generator = self.generator
        inst.frame = frame
        return inst

    def record(self) -> NodeRecord:
        """What the report keeps of the node once the run is over: the node itself."""
        return self


class _FramedNode(_Node):
    """A node with a part in frames (protocol.frames): a generator ``emits`` and keeps
    the frames it ``emitted`` (and ``frame_error``, why it fails although its runner did
    not); a frame-scoped node keeps its instances ``per_frame``; an instance has its
    ``frame``; a gather ``gathers``. ``generator`` is whose frames it reads."""

    __slots__ = ("emits", "emitted", "frame_error", "generator", "gathers", "per_frame")

    def __init__(self, index: int, node_id: str, subnet: str, action: str, estimate: float, timeout: float) -> None:
        super().__init__(index, node_id, subnet, action, estimate, timeout)
        self.emits = False
        self.emitted = None
        self.frame_error = None
        self.generator = None
        self.gathers = False
        self.per_frame = None

    def record(self) -> NodeRecord:
        """The record, with a generator's count of frames, or a frame-scoped node's
        instances (in frame order) and their attempts, costs and times summed."""
        if self.emitted is not None:
            self.frames = len(self.emitted)
        if self.per_frame is not None:
            instances = self.instances = tuple(inst.record() for inst in self.per_frame)
            starts = [r.started_s for r in instances if r.started_s is not None]
            ends = [r.finished_s for r in instances if r.finished_s is not None]
            self.attempts = sum(r.attempts for r in instances)
            self.cost_tao = sum(r.cost_tao for r in instances)
            self.started_s, self.finished_s = min(starts, default=None), max(ends, default=None)
            self.timeouts = sum(r.timeouts for r in instances)
            self.unplanned_retries = sum(r.unplanned_retries for r in instances)
        return self


def scoped_outcome(node: _Node) -> tuple[NodeStatus, str | None]:
    """A frame-scoped node's status once everything it waits for settled: its first
    instance (in frame order) that did not succeed, else its generator's failure."""
    for inst in node.per_frame or ():
        if inst.status != SUCCESS:
            return inst.status, f"{inst.label}: {inst.reason}"
    generator = node.generator
    if generator is not None and generator.status != SUCCESS:
        return BLOCKED, f"ancestor_failed:{generator.id}"
    return SUCCESS, None


def build_nodes(
    plan: WorkflowPlan, check: PlanCheck, config: ExecutorConfig, prices: Mapping[str, float]
) -> list[_Node]:
    """One :class:`_Node` per plan node, in plan order, with its retry policy and refs."""
    graph = check.graph
    assert graph is not None  # a check without errors always has its graph
    timeout = config.default_timeout_s
    framed = _framed(plan, check)
    nodes = [
        (_FramedNode if spec.id in framed else _Node)(
            i,
            spec.id,
            spec.subnet,
            spec.action,
            max(spec.estimated_cost, prices.get(spec.subnet, 0.0)) if prices else spec.estimated_cost,
            timeout,
        )
        for i, spec in enumerate(plan.nodes)
    ]
    for node_id, policy in plan.error_handling.items():
        node = nodes[graph.index[node_id]]
        node.max_attempts = 1 + policy.retry_count
        node.timeout = policy.timeout_seconds or timeout
    for node in nodes:
        compiled = check.compiled.get(node.id)
        if compiled is None:
            continue  # statically blocked
        if compiled.refs:  # resolved at dispatch, inputs included
            sources = dict.fromkeys(graph.index[ref.node_id] for ref in compiled.refs if not ref.is_input)
            node.sources = tuple(nodes[i] for i in sources)
        else:
            node.params = compiled.resolve(_NO_OUTPUTS)
    if framed:
        _frame_roles(nodes, check)
    return nodes


_GATHERS = frozenset(name for name, spec in ACTIONS.items() if spec.gathers)


def _framed(plan: WorkflowPlan, check: PlanCheck) -> set[str]:
    """The nodes with a part in frames: generators, frame-scoped nodes, gathers."""
    gathers = {node.id for node in plan.nodes if node.action in _GATHERS and node.id in check.compiled}
    return {*check.frames.members, *check.frames.generator_of, *gathers}


def _frame_roles(nodes: list[_Node], check: PlanCheck) -> None:
    """Mark generators, frame-scoped nodes and gathers (see :mod:`protocol.frames`)."""
    graph, scopes = check.graph, check.frames
    assert graph is not None
    for generator_id in scopes.members:
        generator = nodes[graph.index[generator_id]]
        assert isinstance(generator, _FramedNode)  # build_nodes made every node in frames one
        generator.emits = True
        generator.emitted = []
    for node_id, generator_id in scopes.generator_of.items():
        node = nodes[graph.index[node_id]]
        assert isinstance(node, _FramedNode)  # (as above)
        node.generator = nodes[graph.index[generator_id]]
        node.per_frame = []
    for node in nodes:
        if isinstance(node, _FramedNode) and node.action in _GATHERS and node.id in check.compiled:
            node.gathers = True
            node.params = None  # always resolved at dispatch, as {"frames": [...]}
            gathered_id = scopes.gathered.get(node.id)
            node.generator = nodes[graph.index[gathered_id]] if gathered_id is not None else None
