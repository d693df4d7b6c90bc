"""The validator's DAG executor: runs a checked plan through a node runner (docs/execution.md).

:func:`execute` is :mod:`validator.scheduler` with time added. The scheduler says
which nodes may start; this module adds the budget ceiling, DataRef resolution
and failure propagation, retries with per-attempt timeouts, the global deadline,
lifecycle events and the metrics scoring reads. It knows no transport: a
:class:`~protocol.runner.NodeRunner` does the work.

The pieces, one idea each:

- :class:`_Node` is one node's state for the run (graphlib's ``_NodeInfo`` with
  time added); it becomes the node's :class:`NodeRecord`.
- :class:`_Budget` is spending against the ceiling; :class:`_DataFlow` holds the
  outputs of nodes that succeeded and says why a node is blocked.
- :class:`_Pool` is the worker tasks; :class:`_Watchdog` enforces the attempt
  timeouts and the global deadline.
- Frames: a generator node's runner emits frames while it runs; each frame adds
  one :class:`_Node` per frame-scoped node (its *instance* on that frame) to the
  scheduler at once, so they start while the generator goes on. The scoped node
  itself is a scheduler *join*: it settles after its generator and all its
  instances, with their outcome.
- :class:`_Run` ties them to the scheduler: dispatch, attempts, settling and
  lifecycle events. :func:`_execution` builds the result.

How it runs, and why it is fast:

- A node is dispatched the moment the scheduler hands it out (its predecessors
  settled), never at tier barriers. Dispatched nodes wait in a queue served by
  worker tasks, at most one per parallel slot, spawned only when a queued node
  finds no idle worker. A worker awaits the runner's coroutine directly, so a
  runner that completes without suspending costs no task and no loop turn.
- Timeouts are enforced by one watchdog timer for the whole run, armed at the
  earliest attempt deadline; an attempt only writes its deadline into its
  worker's slot. When the watchdog fires, overdue workers are cancelled and
  recover from that cancellation as a timed-out attempt.
- :class:`Event` objects are built only when an ``on_event`` callback is given.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from protocol.actions import ACTIONS
from protocol.dataref import INPUT, CompiledParams, MissingField
from protocol.limits import DEFAULT_LIMITS, Limits
from protocol.metrics import RunMetrics
from protocol.output import NodeOutput
from protocol.plan import PlanNode, WorkflowPlan
from protocol.runner import FrameRunner, NodeCall, NodeResult, NodeRunner
from protocol.validation import PlanCheck, check_plan

from .scheduler import Scheduler

__all__ = [
    "BLOCKED", "BUDGET_ABORT", "FAILED", "PENDING", "READY", "RUNNING", "SUCCESS",
    "Attempt", "Event", "Execution", "ExecutorConfig", "NodeRecord", "budget_ceiling", "execute",
]

PENDING, READY, RUNNING = "pending", "ready", "running"
SUCCESS, FAILED, BLOCKED, BUDGET_ABORT = "success", "failed", "blocked", "budget_abort"

BUDGET_REASON = "budget_ceiling"
DEADLINE_REASON = "deadline"

Status = Literal["completed", "partial", "budget_abort", "invalid"]

_INF = math.inf
_NO_OUTPUTS: dict[str, dict] = {}
# The watchdog may fire a hair before its deadline (the loop's clock resolution).
_WATCHDOG_SLACK_S = 1e-4


@dataclass(frozen=True)
class ExecutorConfig:
    """Validator-side execution settings."""

    max_parallel: int = 64  # validator cap; effective = min(plan.max_parallel, cap)
    default_timeout_s: float = 30.0  # per attempt when error_handling gives none
    max_frames: int = 1000  # frames one generator node may emit
    max_frame_instances: int = 10_000  # frame instances in one run, over every generator

    def __post_init__(self) -> None:
        if self.max_parallel < 1:
            raise ValueError("max_parallel must be at least 1")
        if self.max_frames < 0 or self.max_frame_instances < 0:
            raise ValueError("max_frames and max_frame_instances must not be negative")
        if not 0 < self.default_timeout_s < _INF:
            raise ValueError("default_timeout_s must be a positive number of seconds")


def budget_ceiling(max_budget_tao: float | None, total_estimated_cost: float) -> float | None:
    """``min(max_budget, 1.5 × estimate)``; an estimate of 0 contributes nothing; None when neither."""
    bounds = []
    if max_budget_tao is not None:
        bounds.append(max_budget_tao)
    if total_estimated_cost > 0:
        bounds.append(1.5 * total_estimated_cost)
    return min(bounds) if bounds else None


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt at a node: when it started and ended (seconds from the start of
    execution) and why it failed (``None`` when it succeeded)."""

    started_s: float
    finished_s: float
    error: str | None


@dataclass(slots=True)
class NodeRecord:
    """What happened to one node. Times are seconds from the start of execution.

    The node's last attempt ends when the node does and fails with the node's reason;
    only the attempts before it are stored (``retried``, with ``last_started_s``), so
    a run without retries builds no attempt objects. :attr:`attempt_log` puts them together.
    """

    status: str
    reason: str | None
    attempts: int
    cost_tao: float
    started_s: float | None
    finished_s: float | None
    output: dict | None
    timeouts: int
    unplanned_retries: int
    retried: tuple[Attempt, ...] = ()  # the attempts before the last
    last_started_s: float | None = None  # when the last attempt began
    frame: int | None = None  # a frame instance's frame
    frames: int | None = None  # a generator's count of frames emitted
    instances: tuple[NodeRecord, ...] = ()  # a frame-scoped node's instances, in frame order

    @property
    def attempt_log(self) -> tuple[Attempt, ...]:
        """Every attempt, in order; empty for a node that never ran."""
        if self.last_started_s is None or self.attempts == len(self.retried):
            return self.retried
        error = None if self.status == SUCCESS else self.reason
        finished = self.last_started_s if self.finished_s is None else self.finished_s
        return (*self.retried, Attempt(self.last_started_s, finished, error))


@dataclass
class Execution:
    """The outcome of one plan execution; ``nodes`` is in plan order (empty when invalid)."""

    status: Status
    errors: list[str]
    nodes: dict[str, NodeRecord]
    metrics: RunMetrics
    budget_ceiling: float | None
    tiers: list[list[str]]
    critical_path_s: float
    final_output: dict | None
    output_node: str | None
    total_steps: int


@dataclass(frozen=True, slots=True)
class Event:
    """One lifecycle transition of one node (of its instance on ``frame``, when given),
    ``t`` seconds from the start of execution."""

    t: float
    node_id: str
    old: str
    new: str
    reason: str | None
    frame: int | None = None


async def execute(
    plan: WorkflowPlan,
    runner: NodeRunner,
    *,
    task_id: str,
    budget_ceiling: float | None,
    deadline_s: float | None,
    config: ExecutorConfig = ExecutorConfig(),
    check: PlanCheck | None = None,
    limits: Limits = DEFAULT_LIMITS,
    on_event: Callable[[Event], None] | None = None,
    inputs: Mapping[str, Any] | None = None,
    prices: Mapping[str, float] | None = None,
) -> Execution:
    """Execute ``plan`` with ``runner``; never raises for anything the plan or runner does.

    ``check`` is ``check_plan(plan, limits=limits)`` when not given (pass your own to
    apply ``allowed_subnets``). ``deadline_s`` counts from the first dispatch.
    ``inputs`` are the task instance's values that ``${input.*}`` refs read.
    ``prices`` (subnet -> expected cost of one node) set a floor under each node's
    declared estimate, which is what a dispatched node reserves against the ceiling.
    ``on_event`` is called synchronously for every transition and must not raise.
    Cancelling the caller cancels every attempt in flight and leaves no task behind.
    """
    if check is None:
        check = check_plan(plan, limits=limits)
    if check.errors:
        return _invalid(plan, check, budget_ceiling)
    nodes = _nodes(plan, check, config, prices or {})
    budget = _Budget(budget_ceiling) if budget_ceiling is not None else None
    run = _Run(plan, check, nodes, runner, task_id, budget, config, on_event, limits.max_params_bytes)
    run.flow.outputs[INPUT] = dict(inputs or {})
    await run.run(deadline_s)
    return _execution(plan, check, nodes, run, budget_ceiling)


# -- per-node state ---------------------------------------------------------------------


class _Node:
    """One node's state during a run; :meth:`record` is what the report keeps of it."""

    __slots__ = (
        # Fixed for the run.
        "index", "id", "subnet", "action", "estimate", "max_attempts", "timeout", "sources",
        # What the node holds of the budget while in flight (see _Budget.reserve).
        "held",
        # Resolved at dispatch when the node holds refs (None until then).
        "params",
        # What happened; times are seconds from the start of execution.
        "status", "reason", "attempts", "cost", "started", "finished", "timeouts", "unplanned",
        # The attempts that were retried, and when the last one began (see NodeRecord).
        "log", "attempt_started",
    )

    # A plain node plays no part in frames; a _FramedNode has these as its own slots.
    emits = False
    frames: list[dict] | None = None
    frame_error: str | None = None
    generator: _Node | None = None
    gathers = False
    instances: list[_Node] | None = None
    frame: int | None = None
    output: dict | None = None

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
        self.params: dict | None = None
        self.status = PENDING
        self.reason: str | None = None
        self.attempts = 0
        self.cost = 0.0
        self.started: float | None = None
        self.finished: float | None = None
        self.timeouts = 0
        self.unplanned = 0
        self.log: tuple[Attempt, ...] = ()
        self.attempt_started: float | None = None

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

    def record(self, output: dict | None) -> NodeRecord:
        return NodeRecord(
            self.status, self.reason, self.attempts, self.cost, self.started, self.finished,
            output, self.timeouts, self.unplanned, self.log, self.attempt_started,
        )


class _FramedNode(_Node):
    """A node with a part in frames (protocol.frames): a generator ``emits`` and keeps
    its ``frames`` (and ``frame_error``, why it fails although its runner did not); a
    frame-scoped node keeps its ``instances``; an instance has its ``frame`` and keeps
    its ``output``; a gather ``gathers``. ``generator`` is whose frames it reads."""

    __slots__ = ("emits", "frames", "frame_error", "generator", "gathers", "instances", "frame", "output")

    def __init__(self, index: int, node_id: str, subnet: str, action: str, estimate: float, timeout: float) -> None:
        super().__init__(index, node_id, subnet, action, estimate, timeout)
        self.emits = False
        self.frames = None
        self.frame_error = None
        self.generator = None
        self.gathers = False
        self.instances = None
        self.frame = None
        self.output = None

    def record(self, output: dict | None) -> NodeRecord:
        if self.instances is not None:
            return _scoped_record(self)
        record = super().record(output if self.frame is None else self.output)
        record.frame = self.frame
        record.frames = None if self.frames is None else len(self.frames)
        return record


def _scoped_record(node: _Node) -> NodeRecord:
    """A frame-scoped node's record: its instances', summed, under its own status."""
    instances = tuple(inst.record(None) for inst in node.instances or ())
    starts = [r.started_s for r in instances if r.started_s is not None]
    ends = [r.finished_s for r in instances if r.finished_s is not None]
    return NodeRecord(
        node.status, node.reason, sum(r.attempts for r in instances), sum(r.cost_tao for r in instances),
        min(starts, default=None), max(ends, default=None), None,
        sum(r.timeouts for r in instances), sum(r.unplanned_retries for r in instances), instances=instances,
    )


def _scoped_outcome(node: _Node) -> tuple[str, str | None]:
    """A frame-scoped node's status once everything it waits for settled: its first
    instance (in frame order) that did not succeed, else its generator's failure."""
    for inst in node.instances or ():
        if inst.status != SUCCESS:
            return inst.status, f"{inst.label}: {inst.reason}"
    generator = node.generator
    if generator is not None and generator.status != SUCCESS:
        return BLOCKED, f"ancestor_failed:{generator.id}"
    return SUCCESS, None


def _nodes(plan: WorkflowPlan, check: PlanCheck, config: ExecutorConfig, prices: Mapping[str, float]) -> list[_Node]:
    """One :class:`_Node` per plan node, in plan order, with its retry policy and refs."""
    graph = check.graph
    assert graph is not None  # a check without errors always has its graph
    timeout = config.default_timeout_s
    framed = _framed(plan, check)
    nodes = [
        (_FramedNode if spec.id in framed else _Node)(
            i, spec.id, spec.subnet, spec.action, max(spec.estimated_cost, prices.get(spec.subnet, 0.0)), timeout,
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
        generator.emits = True
        generator.frames = []
    for node_id, generator_id in scopes.generator_of.items():
        node = nodes[graph.index[node_id]]
        node.generator = nodes[graph.index[generator_id]]
        node.instances = []
    for node in nodes:
        if isinstance(node, _FramedNode) and node.action in _GATHERS and node.id in check.compiled:
            node.gathers = True
            node.params = None  # always resolved at dispatch, as {"frames": [...]}
            generator_id = scopes.gathered.get(node.id)
            node.generator = nodes[graph.index[generator_id]] if generator_id is not None else None


# -- budget and data flow ----------------------------------------------------------------


class _Budget:
    """Spending against a ceiling; a dispatched node holds part of it until it settles.

    A node holds its estimate, or the dearest single attempt seen so far in the run
    when that is more (so an estimate of 0 hides nothing). A retry faces the ceiling
    exactly as a first attempt does. A run without a ceiling has no budget at all
    (None), so it pays nothing for one.
    """

    __slots__ = ("ceiling", "spent", "_reserved", "_open", "_dearest")

    def __init__(self, ceiling: float) -> None:
        self.ceiling = ceiling
        self.spent = 0.0
        self._reserved = 0.0
        self._open = 0  # reservations not yet released
        self._dearest = 0.0  # the largest cost of one attempt so far

    def exhausted(self) -> bool:
        """Whether dispatching anything more could pass the ceiling."""
        return self.spent + self._reserved >= self.ceiling

    def retry_refused(self, held: float) -> bool:
        """Whether another attempt of a node holding ``held`` could pass the ceiling."""
        return self.spent + self._reserved - held >= self.ceiling

    def charge(self, cost: float) -> None:
        self.spent += cost
        if cost > self._dearest:
            self._dearest = cost

    def reserve(self, estimate: float) -> float:
        """Hold ``max(estimate, dearest attempt so far)``; returns what is held."""
        held = estimate if estimate > self._dearest else self._dearest
        self._open += 1
        self._reserved += held
        return held

    def release(self, held: float) -> None:
        self._open -= 1
        # Back to exactly zero when nothing is open, so float drift never accumulates.
        self._reserved = self._reserved - held if self._open else 0.0


class _DataFlow:
    """The outputs of nodes that succeeded, and what they mean for the nodes that refer to them."""

    __slots__ = ("outputs", "_compiled", "_max_params", "_sizes")

    def __init__(self, compiled: dict[str, CompiledParams], max_params_bytes: int) -> None:
        self.outputs: dict[str, dict] = {}  # node id -> NodeOutput.as_dict(); INPUT -> the inputs
        self._compiled = compiled
        self._max_params = max_params_bytes
        self._sizes: dict[tuple[str, bool], int] = {}  # JSON size per referenced value, measured once

    def block_reason(self, node: _Node) -> str | None:
        """Why ``node`` cannot run (a referenced node did not succeed, a field is missing,
        its params would pass ``max_params_bytes``).

        Called only when every ancestor has settled (the scheduler's invariant), so
        the answer never depends on timing. Fills in ``node``'s resolved params; their
        size is decided from the sizes of the referenced values, before building them.
        """
        if node.frame is not None or node.gathers:
            return self._framed_reason(node)
        for source in node.sources:
            if source.status != SUCCESS:
                return f"ancestor_failed:{source.id}"
        compiled = self._compiled[node.id]
        try:
            size = compiled.resolved_size(self.outputs, self._sizes)
            if size > self._max_params:
                return f"params_too_large:{size}>{self._max_params}"
            node.params = compiled.resolve(self.outputs)
        except MissingField as exc:
            return f"missing_field:{exc}"
        return None

    def _framed_reason(self, node: _Node) -> str | None:
        """:meth:`block_reason` of a frame instance, whose refs read its own frame, or of
        a gather, whose params are resolved once per frame and given as ``{"frames": [...]}``.

        A frame's slice is its instance of each scoped source and the generator's
        frame itself; so a failure blocks only the instances of its own frame.
        """
        generator = node.generator
        if node.gathers and generator is not None and generator.status != SUCCESS:
            return f"ancestor_failed:{generator.id}"
        frames = _frames_read(node)
        for frame in frames:
            for source in node.sources:
                slot = _in_frame(source, frame)
                if slot is not generator and slot.status != SUCCESS:
                    return f"ancestor_failed:{slot.label}"
        compiled = self._compiled[node.id]
        try:
            slices = [self._slice(node, frame) for frame in frames]
            sizes = [compiled.resolved_size(values) for values in slices]
            size = _FRAMES_JSON + sum(sizes) + max(0, len(sizes) - 1) if node.gathers else sizes[0]
            if size > self._max_params:
                return f"params_too_large:{size}>{self._max_params}"
            resolved = [compiled.resolve(values) for values in slices]
        except MissingField as exc:
            return f"missing_field:{exc}"
        node.params = {"frames": resolved} if node.gathers else resolved[0]
        return None

    def _slice(self, node: _Node, frame: int | None) -> dict[str, Any]:
        """What ``node``'s refs read on ``frame``: each source's value there, and the inputs."""
        values = {INPUT: self.outputs[INPUT]}
        for source in node.sources:
            if frame is not None and source.frames is not None:
                values[source.id] = source.frames[frame]
            elif frame is not None and source.instances is not None:
                values[source.id] = source.instances[frame].output
            else:
                values[source.id] = self.outputs.get(source.id)
        return values


_FRAMES_JSON = len('{"frames":[]}')


def _frames_read(node: _Node) -> list[int | None]:
    """The frames whose slices ``node`` reads: its own, or every one a gather joins."""
    if node.frame is not None:
        return [node.frame]
    if node.generator is not None and node.generator.frames is not None:
        return list(range(len(node.generator.frames)))
    return [None]


def _in_frame(source: _Node, frame: int | None) -> _Node:
    """``source`` as seen on ``frame``: its instance there when it is frame-scoped."""
    if frame is not None and source.instances is not None:
        return source.instances[frame]
    return source


# -- workers and timeouts ----------------------------------------------------------------


class _Watchdog:
    """The run's clocks: one timer for every attempt's deadline, and the global deadline.

    A worker writes its current attempt's deadline into its slot of ``deadlines``
    (``inf`` when it has none) and calls :meth:`arm` when that is earlier than
    ``next_at``; so the timer is always armed at the earliest. When it fires,
    overdue slots are marked ``expired`` and their tasks cancelled.
    """

    __slots__ = ("_loop", "deadlines", "expired", "next_at", "_tasks", "_timer")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.deadlines: list[float] = []  # per slot
        self.expired: list[bool] = []  # per slot: the watchdog cancelled its attempt
        self._tasks: list[asyncio.Task[None]] = []  # per slot
        self.next_at = _INF  # when the timer fires; inf when it is not armed
        self._timer: asyncio.TimerHandle | None = None

    def watch(self, task: asyncio.Task[None]) -> None:
        """Give ``task`` the next slot."""
        self.deadlines.append(_INF)
        self.expired.append(False)
        self._tasks.append(task)

    def arm(self, when: float) -> None:
        """Fire at loop time ``when`` instead of ``next_at``."""
        if self._timer is not None:
            self._timer.cancel()
        self.next_at = when
        self._timer = self._loop.call_at(when, self._fire)

    def recover(self, slot: int) -> None:
        """The slot's task took the watchdog's cancellation as a timeout; clear it."""
        self.expired[slot] = False
        self._tasks[slot].uncancel()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    async def wait(self, done: asyncio.Future[None], deadline: float | None) -> bool:
        """Wait for ``done`` until the global ``deadline`` (loop time); False if it passed first."""
        try:
            async with asyncio.timeout_at(deadline):
                await done
        except TimeoutError:
            return False
        return True

    def _fire(self) -> None:
        """Cancel every overdue attempt, then re-arm for the earliest one left."""
        self._timer = None
        self.next_at = _INF
        now = self._loop.time() + _WATCHDOG_SLACK_S
        deadlines = self.deadlines
        for slot, deadline in enumerate(deadlines):
            if deadline <= now:
                deadlines[slot] = _INF
                self.expired[slot] = True
                self._tasks[slot].cancel()
        earliest = min(deadlines, default=_INF)
        if earliest < _INF:
            self.arm(earliest)


class _Pool:
    """Worker tasks serving the queue of dispatched nodes, at most ``max_workers``.

    A worker runs every attempt of a node through the runner and hands the
    outcome to the run (``begin``, ``record``, ``timed_out``, ``settle``).
    """

    __slots__ = ("_loop", "_run", "_runner", "_watchdog", "_max_workers", "_queue", "_idle", "_tasks",
                 "_wake_handle", "_stopping")

    def __init__(self, run: _Run, runner: NodeRunner, watchdog: _Watchdog, max_workers: int) -> None:
        self._loop = asyncio.get_running_loop()
        self._run = run
        self._runner = runner
        self._watchdog = watchdog
        self._max_workers = max_workers
        self._queue: deque[_Node] = deque()  # dispatched nodes no worker has taken yet
        self._idle: list[asyncio.Future[None]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._wake_handle: asyncio.Handle | None = None
        self._stopping = False  # workers are being cancelled; never a timeout then

    def submit(self, node: _Node) -> None:
        """Queue a dispatched node; workers are woken one loop turn later."""
        self._queue.append(node)
        if self._wake_handle is None and self._tasks:
            self._wake_handle = self._loop.call_soon(self.wake)

    def wake(self) -> None:
        """Give every queued node a worker: wake idle ones, then spawn up to the cap.

        Called one loop turn after a dispatch, so nodes that the dispatching worker
        already ran without suspending need no other worker at all.
        """
        self._wake_handle = None
        need = len(self._queue)
        idle = self._idle
        while need and idle:
            future = idle.pop()
            if not future.done():
                future.set_result(None)
                need -= 1
        while need and len(self._tasks) < self._max_workers:
            self._spawn()
            need -= 1

    async def stop(self) -> None:
        """Cancel every worker and wait for them all."""
        self._stopping = True
        self._watchdog.stop()
        if self._wake_handle is not None:
            self._wake_handle.cancel()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self) -> None:
        task = self._loop.create_task(self._worker(len(self._tasks)))
        task.add_done_callback(self._run.worker_exited)
        self._tasks.append(task)
        self._watchdog.watch(task)

    async def _worker(self, slot: int) -> None:
        """Serve the queue: run every attempt of a node, settle it, park when idle.

        The runner's coroutine is awaited right here (no task per node), so a
        runner that answers without suspending costs no loop turn at all.
        """
        queue, runner, run, watchdog = self._queue, self._runner, self._run, self._watchdog
        deadlines, expired, clock, t0 = watchdog.deadlines, watchdog.expired, self._loop.time, run.t0
        while True:
            if not queue:
                future = self._loop.create_future()
                self._idle.append(future)
                await future
                continue
            node = queue.popleft()
            attempt, error = 0, None
            while attempt < node.max_attempts:
                if attempt and run.retry_refused(node):
                    error = f"{error}; retry refused: {BUDGET_REASON}"
                    break
                attempt += 1
                start = clock()
                deadline = deadlines[slot] = start + node.timeout
                if deadline < watchdog.next_at:
                    watchdog.arm(deadline)
                call = run.begin(node, attempt, start)
                try:
                    result = await (run.frames(node, call) if node.emits else runner.run(call))
                except asyncio.CancelledError:
                    if self._stopping or not expired[slot]:
                        raise
                    result = None
                except Exception as exc:  # a runner bug fails the attempt, never the run
                    result = NodeResult(None, error=f"runner error: {type(exc).__name__}: {exc}")
                finally:
                    deadlines[slot] = _INF
                if expired[slot]:
                    # A result that arrived although the watchdog fired (the runner
                    # swallowed the cancellation) is a timeout all the same.
                    watchdog.recover(slot)
                    error = run.timed_out(node)
                else:
                    error = run.record(node, result)
                if error is None or node.frames or attempt == node.max_attempts:  # no retry after a frame
                    break
                node.log = (*node.log, Attempt(start - t0, clock() - t0, error))
            run.settle(node, error)


# -- frames -----------------------------------------------------------------------------


class _Frames:
    """What the run knows about frames that does not change: each generator's scoped
    nodes (in topological order), each node's edges and spec, and the frame limits."""

    __slots__ = ("members", "specs", "_preds", "_nodes", "_max_frames", "_instances_left", "_max_instances")

    def __init__(
        self,
        specs: list[PlanNode],
        preds: list[list[int]],
        check: PlanCheck,
        nodes: list[_Node],
        config: ExecutorConfig,
    ) -> None:
        graph = check.graph
        assert graph is not None
        self.members = {
            graph.index[generator]: [nodes[graph.index[member]] for member in members]
            for generator, members in check.frames.members.items()
        }
        self.specs = specs
        self._preds = preds
        self._nodes = nodes
        self._max_frames = config.max_frames
        self._max_instances = self._instances_left = config.max_frame_instances

    def refuse(self, generator: _Node, output: object) -> str | None:
        """Why this frame is refused, or None after counting its instances."""
        if not isinstance(output, NodeOutput):
            return f"malformed frame ({type(output).__name__})"
        if len(generator.frames) >= self._max_frames:  # type: ignore[arg-type]
            return f"frame_limit:{self._max_frames}"
        needed = len(self.members[generator.index])
        if needed > self._instances_left:
            return f"frame_instance_limit:{self._max_instances}"
        self._instances_left -= needed
        return None

    def preds(self, member: _Node, frame: int) -> list[int]:
        """What ``member``'s instance on ``frame`` waits for: the instances on the same
        frame of its scoped predecessors, and its other predecessors themselves (never
        the generator: the frame is already there)."""
        generator = member.generator
        out = []
        for p in self._preds[member.index]:
            pred = self._nodes[p]
            if pred is generator:
                continue
            if pred.instances is not None and pred.generator is generator:
                out.append(pred.instances[frame].index)
            else:
                out.append(p)
        return out


# -- the run ---------------------------------------------------------------------------


class _Run:
    """One execution: dispatches what the scheduler allows and settles what the workers finish."""

    def __init__(
        self,
        plan: WorkflowPlan,
        check: PlanCheck,
        nodes: list[_Node],
        runner: NodeRunner,
        task_id: str,
        budget: _Budget | None,
        config: ExecutorConfig,
        on_event: Callable[[Event], None] | None,
        max_params_bytes: int,
    ) -> None:
        graph = check.graph
        assert graph is not None
        self._nodes = nodes
        self._task_id = task_id
        self._on_event = on_event
        self._static_errors = {nodes[graph.index[k]]: v for k, v in check.node_errors.items()}
        self._budget = budget
        self.flow = _DataFlow(check.compiled, max_params_bytes)
        parallel = min(plan.max_parallel or config.max_parallel, config.max_parallel)
        self._sched = Scheduler(
            graph.preds, graph.succs, graph.topo_order(), max_parallel=parallel,
            touches=[node.touches for node in plan.nodes],
            parallel_safe=[node.parallel_safe for node in plan.nodes],
            on_ready=self._on_ready if on_event is not None else None,
            on_join=self._on_join,
        )
        self._frames = _Frames(plan.nodes, graph.preds, check, nodes, config)
        self._frame_runner = runner.run_frames if isinstance(runner, FrameRunner) else None
        loop = asyncio.get_running_loop()
        self._watchdog = _Watchdog(loop)
        units = parallel if check.frames.members else min(parallel, len(nodes))  # instances come and go
        self._pool = _Pool(self, runner, self._watchdog, units)
        self._clock = loop.time
        self.t0 = self._clock()
        self.t_first: float | None = None  # first dispatch, from the start
        self.t_last: float | None = None  # last settle, from the start
        self._inflight = 0
        self._halted = False  # budget or deadline: nothing more is dispatched
        self._done: asyncio.Future[None] = loop.create_future()

    async def run(self, deadline_s: float | None) -> None:
        for node, reason in self._static_errors.items():
            self._set(node, BLOCKED, reason)
            self._sched.remove(node.index)
        for node in self._nodes:
            if node.instances is not None:
                self._sched.join(node.index)
        self._sched.prepare()
        self._pump()
        self._check_finished()
        if self._done.done():
            return
        self._pool.wake()
        deadline = None
        if deadline_s is not None:
            deadline = self.t0 + (self.t_first or 0.0) + deadline_s
        try:
            finished = await self._watchdog.wait(self._done, deadline)
        finally:
            await self._pool.stop()
        if not finished:
            self._expire()

    def worker_exited(self, task: asyncio.Task[None]) -> None:
        """A worker only ends by cancellation; anything else is a bug to surface."""
        if not task.cancelled() and task.exception() is not None and not self._done.done():
            self._done.set_exception(task.exception())  # type: ignore[arg-type]

    def _expire(self) -> None:
        """The global deadline passed: fail what runs, block what never started."""
        self._halted = True
        now = self._now()
        self.t_last = now
        for node in self._nodes:
            if node.status == RUNNING:
                node.finished = now
                self._set(node, FAILED, DEADLINE_REASON)
            elif node.status == PENDING or node.status == READY:
                self._set(node, BLOCKED, DEADLINE_REASON)

    def _check_finished(self) -> None:
        if self._inflight == 0 and (self._halted or not self._sched.is_active()):
            if not self._done.done():
                self._done.set_result(None)

    # -- dispatch -----------------------------------------------------------------------

    def _pump(self) -> None:
        """Dispatch everything the scheduler allows, settling nodes blocked at dispatch."""
        sched, nodes, budget, flow = self._sched, self._nodes, self._budget, self.flow
        settled = True  # get_ready() can only offer more after a done()
        while settled:
            settled = False
            for i in sched.get_ready():
                if budget is not None and budget.exhausted():
                    self._abort_budget()
                    return
                node = nodes[i]
                reason = flow.block_reason(node) if node.params is None else None
                if reason is None:
                    self._dispatch(node)
                else:
                    self._set(node, BLOCKED, reason)
                    sched.done(i)
                    settled = True

    def _abort_budget(self) -> None:
        self._halted = True
        for node in self._nodes:
            if node.status == PENDING or node.status == READY:
                self._set(node, BUDGET_ABORT, BUDGET_REASON)

    def _dispatch(self, node: _Node) -> None:
        if self.t_first is None:
            self.t_first = self._now()
        self._inflight += 1
        if self._budget is not None:
            node.held = self._budget.reserve(node.estimate)
        if self._on_event is None:  # the hot path: no Event to build
            node.status = RUNNING
        else:
            self._set(node, RUNNING, None)
        self._pool.submit(node)

    # -- attempts, called by the workers ---------------------------------------------------

    def begin(self, node: _Node, attempt: int, start: float) -> NodeCall:
        """Count an attempt that starts at loop time ``start`` and build its call."""
        node.attempt_started = start - self.t0
        if attempt == 1:
            node.started = node.attempt_started
        node.attempts = attempt
        return NodeCall(
            self._task_id, node.id, node.subnet, node.action, node.params, node.timeout, attempt,  # type: ignore[arg-type]
        )

    def retry_refused(self, node: _Node) -> bool:
        """Whether the ceiling refuses another attempt of ``node``; the run then halts on
        its budget, as it would for a first attempt."""
        if self._budget is None or not self._budget.retry_refused(node.held):
            return False
        self._abort_budget()
        return True

    def timed_out(self, node: _Node) -> str:
        node.timeouts += 1
        return f"timeout after {node.timeout}s"

    def record(self, node: _Node, result: object) -> str | None:
        """Charge one completed attempt; store the output on success, else return the error."""
        if not isinstance(result, NodeResult):
            return f"runner returned {type(result).__name__}, not NodeResult"
        cost = result.cost_tao
        if type(cost) is not float and type(cost) is not int or not 0 <= cost < _INF:
            return f"runner reported an invalid cost: {cost!r}"
        node.cost += cost
        if self._budget is not None:
            self._budget.charge(cost)
        extra = result.unplanned_retries
        if type(extra) is int and extra > 0:
            node.unplanned += extra
        output = result.output
        if output is None:
            return result.error or "no output"
        if not isinstance(output, NodeOutput):
            return f"runner returned malformed output ({type(output).__name__})"
        if node.frame is None:
            self.flow.outputs[node.id] = output.as_dict()
        else:
            node.output = output.as_dict()
        return None

    def settle(self, node: _Node, error: str | None) -> None:
        """Finish a node that ran (``error`` is None on success) and dispatch what follows."""
        self.t_last = node.finished = self._clock() - self.t0
        self._inflight -= 1
        if self._budget is not None:
            self._budget.release(node.held)
        if error is None and self._on_event is None:  # the hot path: no Event to build
            node.status = SUCCESS
        else:
            self._set(node, SUCCESS if error is None else FAILED, error)
        if not self._halted:  # once halted, the scheduler is no longer consulted
            self._sched.done(node.index)
            self._pump()
        if self._inflight == 0:
            self._check_finished()

    # -- frames ---------------------------------------------------------------------------

    async def frames(self, node: _Node, call: NodeCall) -> NodeResult:
        """Run one attempt of generator ``node``, taking its frames as they come."""
        if self._frame_runner is None:
            return NodeResult(None, error="this runner cannot run generator nodes")
        result = await self._frame_runner(call, lambda output: self.emit(node, output))
        if node.frame_error is not None and isinstance(result, NodeResult):
            return NodeResult(
                None, cost_tao=result.cost_tao, error=node.frame_error, unplanned_retries=result.unplanned_retries,
            )
        return result

    def emit(self, generator: _Node, output: object) -> bool:
        """A frame of ``generator`` appeared: add its instances and dispatch what may start.

        Returns False, keeping nothing, when no more frames are wanted: the attempt is
        over, or a frame limit is reached (the generator then fails with that reason).
        """
        if generator.status != RUNNING or generator.frame_error is not None:
            return False
        refusal = self._frames.refuse(generator, output)
        if refusal is not None:
            generator.frame_error = refusal
            return False
        frame = len(generator.frames)  # type: ignore[arg-type]
        generator.frames.append(output.as_dict())  # type: ignore[union-attr]
        for member in self._frames.members[generator.index]:
            self._add_instance(member, frame)
        if not self._halted:
            self._pump()
        return True

    def _add_instance(self, member: _Node, frame: int) -> None:
        inst = member.instance(frame, len(self._nodes))
        self._nodes.append(inst)
        member.instances.append(inst)  # type: ignore[union-attr]
        if self._halted:  # the budget stopped dispatching: this instance never runs
            self._set(inst, BUDGET_ABORT, BUDGET_REASON)
            return
        spec = self._frames.specs[member.index]
        self._sched.add(
            self._frames.preds(member, frame), member.index, touches=spec.touches, parallel_safe=spec.parallel_safe,
        )

    def _on_join(self, i: int) -> None:
        node = self._nodes[i]
        self._set(node, *_scoped_outcome(node))

    # -- lifecycle events -----------------------------------------------------------------

    def _now(self) -> float:
        return self._clock() - self.t0

    def _on_ready(self, i: int) -> None:
        self._set(self._nodes[i], READY, None)

    def _set(self, node: _Node, new: str, reason: str | None) -> None:
        old = node.status
        node.status = new
        node.reason = reason
        if self._on_event is not None:
            self._on_event(Event(self._now(), node.id, old, new, reason, node.frame))


# -- the outcome ---------------------------------------------------------------------------


def _invalid(plan: WorkflowPlan, check: PlanCheck, ceiling: float | None) -> Execution:
    return Execution(
        status="invalid", errors=list(check.errors), nodes={}, metrics=RunMetrics(0.0, 0.0, 0.0, 0, 0, 0, 0),
        budget_ceiling=ceiling, tiers=check.tiers, critical_path_s=check.critical_path_s,
        final_output=None, output_node=None, total_steps=len(plan.nodes),
    )


def _execution(
    plan: WorkflowPlan, check: PlanCheck, nodes: list[_Node], run: _Run, ceiling: float | None
) -> Execution:
    """The outcome; ``nodes`` holds the plan's nodes, then the frame instances the run added."""
    outputs = run.flow.outputs
    planned = nodes[: len(plan.nodes)]
    statuses = [node.status for node in planned]
    output_node = _output_node(plan, check, planned)
    return Execution(
        status=_overall(statuses), errors=[],
        nodes={node.id: node.record(outputs.get(node.id)) for node in planned},
        metrics=_metrics(nodes, planned, statuses, run.t_first, run.t_last),
        budget_ceiling=ceiling, tiers=check.tiers, critical_path_s=check.critical_path_s,
        final_output=outputs.get(output_node) if output_node is not None else None,
        output_node=output_node, total_steps=len(planned),
    )


def _metrics(
    nodes: list[_Node], planned: list[_Node], statuses: list[str], t_first: float | None, t_last: float | None
) -> RunMetrics:
    """Costs, retries and timeouts over every attempt (instances included); completion
    and hard failures over the plan's nodes, each counting once."""
    latency = 0.0
    if t_first is not None and t_last is not None:
        latency = max(0.0, t_last - t_first)
    completed = statuses.count(SUCCESS) if len(nodes) == len(planned) else sum(map(_completion, planned))
    return RunMetrics(
        completion_ratio=completed / len(planned),
        latency_s=latency,
        cost_tao=sum([node.cost for node in nodes]),
        retries=sum([node.attempts - 1 for node in nodes if node.attempts > 1]),
        unplanned_retries=sum([node.unplanned for node in nodes]),
        timeouts=sum([node.timeouts for node in nodes]),
        hard_failures=statuses.count(FAILED) + statuses.count(BLOCKED),
    )


def _completion(node: _Node) -> float:
    """A node's share of completion_ratio: 1 if it succeeded; for a frame-scoped node, the
    fraction of its instances that succeeded (with none, whether its generator did)."""
    if not node.instances:
        return 1.0 if node.status == SUCCESS else 0.0
    return sum(1 for inst in node.instances if inst.status == SUCCESS) / len(node.instances)


def _output_node(plan: WorkflowPlan, check: PlanCheck, nodes: list[_Node]) -> str | None:
    """The output node; else the single sink; else the last sink that succeeded."""
    if plan.output_node is not None:
        return plan.output_node
    assert check.graph is not None
    sinks = [node for node, succs in zip(nodes, check.graph.succs) if not succs]
    if len(sinks) == 1:
        return sinks[0].id
    for node in reversed(sinks):
        if node.status == SUCCESS:
            return node.id
    return None


def _overall(statuses: list[str]) -> Status:
    if statuses.count(SUCCESS) == len(statuses):
        return "completed"
    if BUDGET_ABORT in statuses:
        return "budget_abort"
    return "partial"
