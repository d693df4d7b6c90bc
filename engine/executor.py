"""The DAG executor: runs a checked plan through a node runner (docs/execution.md).

:func:`execute` is :mod:`engine.scheduler` with time added. The scheduler says
which nodes may start; this module adds the budget ceiling, DataRef resolution
and failure propagation, retries with per-attempt timeouts, the global deadline,
lifecycle events and the metrics scoring reads. It knows no transport: a
:class:`~protocol.runner.NodeRunner` does the work.

The pieces, one module per idea:

- :mod:`engine.nodes`: ``_Node`` is one node's state for the run (graphlib's
  ``_NodeInfo`` with time added); it becomes the node's :class:`NodeRecord`.
- :mod:`engine.budget`: spending against the ceiling; :mod:`engine.dataflow`: the
  outputs of nodes that succeeded, and why a node is blocked (DataRefs at dispatch).
- :mod:`engine.workers`: the worker tasks, one ``_Slot`` each, and the watchdog that
  enforces the attempt timeouts and the global deadline.
- :mod:`engine.frames`: a generator node's runner emits frames while it runs; each
  frame adds one ``_Node`` per frame-scoped node (its *instance* on that frame) to
  the scheduler at once, so they start while the generator goes on. The scoped node
  itself is a scheduler *join*: it settles after its generator and all its
  instances, with their outcome.
- This module: ``_Run`` ties them to the scheduler (dispatch, attempts, settling
  and lifecycle events) and is the :class:`~engine.workers.AttemptHost` the workers
  call; :mod:`engine.outcome` builds the result.

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
import time
from collections.abc import Callable, Mapping
from typing import Any

from protocol.dataref import INPUT
from protocol.limits import DEFAULT_LIMITS, Limits
from protocol.output import NodeOutput
from protocol.plan import WorkflowPlan
from protocol.runner import FrameRunner, NodeCall, NodeResult, NodeRunner
from protocol.validation import PlanCheck, check_plan

from .budget import _Budget
from .dataflow import _DataFlow
from .frames import _Frames
from .model import (
    BLOCKED,
    BUDGET_ABORT,
    BUDGET_REASON,
    DEADLINE_REASON,
    FAILED,
    PENDING,
    READY,
    RUNNING,
    SUCCESS,
    Attempt,
    Event,
    Execution,
    ExecutorConfig,
    NodeRecord,
    NodeStatus,
)
from .nodes import _FramedNode, _Node, build_nodes, scoped_outcome
from .outcome import execution, invalid
from .scheduler import Scheduler
from .workers import Pool, Watchdog

__all__ = [
    "BLOCKED",
    "BUDGET_ABORT",
    "FAILED",
    "PENDING",
    "READY",
    "RUNNING",
    "SUCCESS",
    "Attempt",
    "Event",
    "Execution",
    "ExecutorConfig",
    "NodeRecord",
    "execute",
]

_INF = float("inf")


def _clock(loop: asyncio.AbstractEventLoop) -> Callable[[], float]:
    """The loop's clock; ``time.monotonic`` itself when the loop's ``time`` is asyncio's
    own (one Python call less, twice per node), else the loop's (a simulated clock)."""
    if type(loop).time is asyncio.BaseEventLoop.time:
        return time.monotonic
    return loop.time


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
        return invalid(plan, check, budget_ceiling)
    nodes = build_nodes(plan, check, config, prices or {})
    budget = _Budget(budget_ceiling) if budget_ceiling is not None else None
    run = _Run(plan, check, nodes, runner, task_id, budget, config, on_event, limits.max_params_bytes)
    run.flow.outputs[INPUT] = dict(inputs or {})
    await run.run(deadline_s)
    return execution(plan, check, nodes, run.flow.outputs, (run.t_first, run.t_last), budget_ceiling)


class _Run:
    """One execution: dispatches what the scheduler allows and settles what the workers finish."""

    __slots__ = (
        "_budget",
        "_done",
        "_frame_runner",
        "_frames",
        "_halted",
        "_inflight",
        "_nodes",
        "_on_event",
        "_outputs",
        "_pool",
        "_queue",
        "_sched",
        "_static_errors",
        "_watchdog",
        "clock",
        "flow",
        "t0",
        "t_first",
        "t_last",
        "task_id",
    )

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
        self.task_id = task_id
        self._on_event = on_event
        self._static_errors = {graph.index[k]: v for k, v in check.node_errors.items()}
        self._budget = budget
        self.flow = _DataFlow(check.compiled, max_params_bytes)
        self._outputs = self.flow.outputs
        parallel = min(plan.max_parallel or config.max_parallel, config.max_parallel)
        self._sched = Scheduler(
            graph.preds,
            graph.succs,
            graph.topo_order(),
            max_parallel=parallel,
            touches=[node.touches for node in plan.nodes],
            parallel_safe=[node.parallel_safe for node in plan.nodes],
            on_ready=self._on_ready if on_event is not None else None,
            on_join=self._on_join,
        )
        self._frames = _Frames(plan.nodes, graph.preds, check, nodes, config)
        self._frame_runner = runner.run_frames if isinstance(runner, FrameRunner) else None
        loop = asyncio.get_running_loop()
        self._watchdog = Watchdog(loop)
        units = parallel if check.frames.members else min(parallel, len(nodes))  # instances come and go
        self._pool = Pool(self, runner, self._watchdog, units)
        self._queue = self._pool.queue
        self.clock = _clock(loop)
        self.t0 = self.clock()
        self.t_first: float | None = None  # first dispatch, from the start
        self.t_last: float | None = None  # last settle, from the start
        self._inflight = 0
        self._halted = False  # budget or deadline: nothing more is dispatched
        self._done: asyncio.Future[None] = loop.create_future()

    async def run(self, deadline_s: float | None) -> None:
        for i, reason in self._static_errors.items():
            self._set(self._nodes[i], BLOCKED, reason)
            self._sched.remove(i)
        for node in self._nodes:
            if node.per_frame is not None:
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
                node.finished_s = now
                self._set(node, FAILED, DEADLINE_REASON)
            elif node.status == PENDING or node.status == READY:
                self._set(node, BLOCKED, DEADLINE_REASON)

    def _check_finished(self) -> None:
        if self._inflight == 0 and (self._halted or not self._sched.is_active()):
            if not self._done.done():
                self._done.set_result(None)

    # -- dispatch -----------------------------------------------------------------------

    def _pump(self) -> None:
        """Dispatch everything the scheduler allows, settling nodes blocked at dispatch.

        Dispatching is inlined here: it runs once per node, so a call saved is a
        measurable share of a zero-delay node's cost (docs/benchmarks.md).
        """
        sched = self._sched
        ready = sched.get_ready()
        if not ready:
            return
        nodes, budget, flow, queue = self._nodes, self._budget, self.flow, self._queue
        quiet = self._on_event is None
        while ready:
            settled = False  # get_ready() can only offer more after a done()
            for i in ready:
                if budget is not None and budget.exhausted():
                    self._abort_budget()
                    break
                node = nodes[i]
                if node.params is None:
                    reason = flow.block_reason(node)
                    if reason is not None:
                        self._set(node, BLOCKED, reason)
                        sched.done(i)
                        settled = True
                        continue
                if self.t_first is None:
                    self.t_first = self._now()
                self._inflight += 1
                if budget is not None:
                    node.held = budget.reserve(node.estimate, node.subnet)
                if quiet:  # the hot path: no Event to build
                    node.status = RUNNING
                else:
                    self._set(node, RUNNING, None)
                queue.append(node)
            ready = sched.get_ready() if settled and not self._halted else []
        self._pool.dispatched()

    def _abort_budget(self) -> None:
        self._halted = True
        for node in self._nodes:
            if node.status == PENDING or node.status == READY:
                self._set(node, BUDGET_ABORT, BUDGET_REASON)

    # -- attempts, called by the workers ---------------------------------------------------

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
        if type(result) is not NodeResult and not isinstance(result, NodeResult):
            return f"runner returned {type(result).__name__}, not NodeResult"
        cost = result.cost_tao
        if cost:  # 0 is the common case, and needs no charge
            if type(cost) is not float and type(cost) is not int or not 0 < cost < _INF:
                return f"runner reported an invalid cost: {cost!r}"
            node.cost_tao += cost
            if self._budget is not None:
                self._budget.charge(cost, node.subnet)
        elif type(cost) is not float and type(cost) is not int:
            return f"runner reported an invalid cost: {cost!r}"
        extra = result.unplanned_retries
        if extra and type(extra) is int and extra > 0:
            node.unplanned_retries += extra
        output = result.output
        if output is None:
            return result.error or "no output"
        if type(output) is not NodeOutput and not isinstance(output, NodeOutput):
            return f"runner returned malformed output ({type(output).__name__})"
        node.output = out = output.as_dict()
        if node.frame is None:
            self._outputs[node.id] = out
        return None

    def settle(self, node: _Node, error: str | None) -> None:
        """Finish a node that ran (``error`` is None on success) and dispatch what follows."""
        self.t_last = node.finished_s = self.clock() - self.t0
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
                None,
                cost_tao=result.cost_tao,
                error=node.frame_error,
                unplanned_retries=result.unplanned_retries,
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
            assert isinstance(generator, _FramedNode)  # only a node in frames emits
            generator.frame_error = refusal
            return False
        frames = self._frames
        for member, inst in frames.add(generator, output):  # type: ignore[arg-type]
            if self._halted:  # the budget stopped dispatching: this instance never runs
                self._set(inst, BUDGET_ABORT, BUDGET_REASON)
                continue
            spec = frames.specs[member.index]
            self._sched.add(
                frames.preds(member, inst.frame),  # type: ignore[arg-type]
                member.index,
                touches=spec.touches,
                parallel_safe=spec.parallel_safe,
            )
        if not self._halted:
            self._pump()
        return True

    def _on_join(self, i: int) -> None:
        node = self._nodes[i]
        self._set(node, *scoped_outcome(node))

    # -- lifecycle events -----------------------------------------------------------------

    def _now(self) -> float:
        return self.clock() - self.t0

    def _on_ready(self, i: int) -> None:
        self._set(self._nodes[i], READY, None)

    def _set(self, node: _Node, new: NodeStatus, reason: str | None) -> None:
        old = node.status
        node.status = new
        node.reason = reason
        if self._on_event is not None:
            self._on_event(Event(self._now(), node.id, old, new, reason, node.frame))
