"""The validator's DAG executor: runs a checked plan through a node runner (docs/execution.md).

:func:`execute` is :mod:`validator.scheduler` with time added. The scheduler says
which nodes may start; this module adds the budget ceiling, DataRef resolution
and failure propagation, retries with per-attempt timeouts, the global deadline,
lifecycle events and the metrics scoring reads. It knows no transport: a
:class:`~protocol.runner.NodeRunner` does the work.

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
- Per-node state lives in lists indexed by plan position; :class:`Event` objects
  are built only when an ``on_event`` callback is given.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from protocol.dataref import CompiledParams, MissingField
from protocol.limits import DEFAULT_LIMITS, Limits
from protocol.metrics import RunMetrics
from protocol.output import NodeOutput
from protocol.plan import WorkflowPlan
from protocol.runner import NodeCall, NodeResult, NodeRunner
from protocol.validation import PlanCheck, check_plan

from .scheduler import Scheduler

__all__ = [
    "BLOCKED", "BUDGET_ABORT", "FAILED", "PENDING", "READY", "RUNNING", "SUCCESS",
    "Event", "Execution", "ExecutorConfig", "NodeRecord", "budget_ceiling", "execute",
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

    def __post_init__(self) -> None:
        if self.max_parallel < 1:
            raise ValueError("max_parallel must be at least 1")
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


@dataclass(slots=True)
class NodeRecord:
    """What happened to one node. Times are seconds from the start of execution."""

    status: str
    reason: str | None
    attempts: int
    cost_tao: float
    started_s: float | None
    finished_s: float | None
    output: dict | None
    timeouts: int
    unplanned_retries: int


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
    """One lifecycle transition of one node, ``t`` seconds from the start of execution."""

    t: float
    node_id: str
    old: str
    new: str
    reason: str | None


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
) -> Execution:
    """Execute ``plan`` with ``runner``; never raises for anything the plan or runner does.

    ``check`` is ``check_plan(plan, limits=limits)`` when not given (pass your own to
    apply ``allowed_subnets``). ``deadline_s`` counts from the first dispatch.
    ``on_event`` is called synchronously for every transition and must not raise.
    Cancelling the caller cancels every attempt in flight and leaves no task behind.
    """
    if check is None:
        check = check_plan(plan, limits=limits)
    if check.errors:
        return _invalid(plan, check, budget_ceiling)
    run = _Run(plan, runner, check, task_id, budget_ceiling, config, on_event)
    await run.run(deadline_s)
    return run.result(check)


def _invalid(plan: WorkflowPlan, check: PlanCheck, ceiling: float | None) -> Execution:
    return Execution(
        status="invalid", errors=list(check.errors), nodes={}, metrics=RunMetrics(0.0, 0.0, 0.0, 0, 0, 0, 0),
        budget_ceiling=ceiling, tiers=check.tiers, critical_path_s=check.critical_path_s,
        final_output=None, output_node=None, total_steps=len(plan.nodes),
    )


class _Run:
    """One execution's state. Lists are indexed by plan position."""

    def __init__(
        self,
        plan: WorkflowPlan,
        runner: NodeRunner,
        check: PlanCheck,
        task_id: str,
        ceiling: float | None,
        config: ExecutorConfig,
        on_event: Callable[[Event], None] | None,
    ) -> None:
        graph = check.graph
        assert graph is not None  # a check without errors always has its graph
        nodes = plan.nodes
        n = len(nodes)
        self._plan = plan
        self._runner = runner
        self._task_id = task_id
        self._ceiling = ceiling
        self._on_event = on_event
        self._ids = graph.ids
        self._succs = graph.succs
        self._subnet = [node.subnet for node in nodes]
        self._action = [node.action for node in nodes]
        self._estimate = [node.estimated_cost for node in nodes]
        self._max_attempts = [1] * n
        self._timeout = [config.default_timeout_s] * n
        for node_id, policy in plan.error_handling.items():
            i = graph.index[node_id]
            self._max_attempts[i] = 1 + policy.retry_count
            self._timeout[i] = policy.timeout_seconds or config.default_timeout_s
        self._static_errors = {graph.index[k]: v for k, v in check.node_errors.items()}
        self._compiled = check.compiled
        self._params, self._sources = _prepared_params(graph.ids, graph.index, check.compiled)

        self._status = [PENDING] * n
        self._reason: list[str | None] = [None] * n
        self._attempts = [0] * n
        self._cost = [0.0] * n
        self._started: list[float | None] = [None] * n
        self._finished: list[float | None] = [None] * n
        self._timeouts = [0] * n
        self._unplanned = [0] * n
        self._outputs: dict[str, dict] = {}

        parallel = min(plan.max_parallel or config.max_parallel, config.max_parallel)
        self._max_workers = min(parallel, n)
        self._sched = Scheduler(
            graph.preds, graph.succs, graph.topo_order(), max_parallel=parallel,
            touches=[node.touches for node in nodes],
            parallel_safe=[node.parallel_safe for node in nodes],
            on_ready=self._on_ready if on_event is not None else None,
        )
        self._loop = asyncio.get_running_loop()
        self._clock = self._loop.time
        self._t0 = self._clock()
        self._t_first: float | None = None  # first dispatch, from the start
        self._t_last: float | None = None  # last settle, from the start
        self._spent = 0.0
        self._reserved = 0.0  # estimated cost of dispatched, unsettled nodes
        self._inflight = 0
        self._halted = False  # budget or deadline: nothing more is dispatched
        self._stopping = False  # workers are being cancelled; never a timeout then

        self._queue: deque[int] = deque()  # dispatched nodes no worker has taken yet
        self._idle: list[asyncio.Future[None]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._deadlines: list[float] = []  # per worker: current attempt's deadline or inf
        self._expired: list[bool] = []  # per worker: the watchdog cancelled its attempt
        self._watchdog: asyncio.TimerHandle | None = None
        self._watchdog_at = _INF
        self._wake_handle: asyncio.Handle | None = None
        self._done: asyncio.Future[None] = self._loop.create_future()

    # -- the run as a whole -------------------------------------------------------

    async def run(self, deadline_s: float | None) -> None:
        for i, reason in self._static_errors.items():
            self._set(i, BLOCKED, reason)
            self._sched.remove(i)
        self._sched.prepare()
        self._pump()
        self._check_finished()
        if self._done.done():
            return
        self._wake()
        expired = False
        deadline = None
        if deadline_s is not None:
            deadline = self._t0 + (self._t_first or 0.0) + deadline_s
        try:
            async with asyncio.timeout_at(deadline):
                await self._done
        except TimeoutError:
            expired = True
        finally:
            await self._stop_workers()
        if expired:
            self._expire()

    async def _stop_workers(self) -> None:
        self._stopping = True
        for handle in (self._watchdog, self._wake_handle):
            if handle is not None:
                handle.cancel()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _expire(self) -> None:
        """The global deadline passed: fail what runs, block what never started."""
        self._halted = True
        now = self._now()
        self._t_last = now
        for i, status in enumerate(self._status):
            if status == RUNNING:
                self._finished[i] = now
                self._set(i, FAILED, DEADLINE_REASON)
            elif status == PENDING or status == READY:
                self._set(i, BLOCKED, DEADLINE_REASON)

    def _check_finished(self) -> None:
        if self._inflight == 0 and (self._halted or not self._sched.is_active()):
            if not self._done.done():
                self._done.set_result(None)

    # -- dispatch ---------------------------------------------------------------------

    def _pump(self) -> None:
        """Dispatch everything the scheduler allows, settling nodes blocked at dispatch."""
        sched, sources, ceiling = self._sched, self._sources, self._ceiling
        settled = True  # get_ready() can only offer more after a done()
        while settled:
            settled = False
            for i in sched.get_ready():
                if ceiling is not None and self._spent + self._reserved >= ceiling:
                    self._abort_budget()
                    return
                reason = self._block_reason(i) if sources[i] else None
                if reason is None:
                    self._dispatch(i)
                else:
                    self._set(i, BLOCKED, reason)
                    sched.done(i)
                    settled = True

    def _abort_budget(self) -> None:
        self._halted = True
        for i, status in enumerate(self._status):
            if status == PENDING or status == READY:
                self._set(i, BUDGET_ABORT, BUDGET_REASON)

    def _block_reason(self, i: int) -> str | None:
        """Why ``i`` cannot run (a referenced node did not succeed, a field is missing).

        Every ancestor has settled by now (the scheduler's invariant), so the
        answer never depends on timing. Fills in ``i``'s resolved params.
        """
        status = self._status
        for src in self._sources[i]:
            if status[src] != SUCCESS:
                return f"ancestor_failed:{self._ids[src]}"
        try:
            self._params[i] = self._compiled[self._ids[i]].resolve(self._outputs)
        except MissingField as exc:
            return f"missing_field:{exc}"
        return None

    def _dispatch(self, i: int) -> None:
        if self._t_first is None:
            self._t_first = self._now()
        self._inflight += 1
        self._reserved += self._estimate[i]
        if self._on_event is None:  # the hot path: no Event to build
            self._status[i] = RUNNING
        else:
            self._set(i, RUNNING, None)
        self._queue.append(i)
        if self._wake_handle is None and self._tasks:
            self._wake_handle = self._loop.call_soon(self._wake)

    def _wake(self) -> None:
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

    def _spawn(self) -> None:
        slot = len(self._tasks)
        self._deadlines.append(_INF)
        self._expired.append(False)
        task = self._loop.create_task(self._worker(slot))
        task.add_done_callback(self._worker_exited)
        self._tasks.append(task)

    def _worker_exited(self, task: asyncio.Task[None]) -> None:
        """A worker only ends by cancellation; anything else is a bug to surface."""
        if not task.cancelled() and task.exception() is not None and not self._done.done():
            self._done.set_exception(task.exception())  # type: ignore[arg-type]

    # -- workers ------------------------------------------------------------------------

    async def _worker(self, slot: int) -> None:
        """Serve the queue: run every attempt of a node, settle it, park when idle.

        The runner's coroutine is awaited right here (no task per node), so a
        runner that answers without suspending costs no loop turn at all.
        """
        queue, runner, max_attempts = self._queue, self._runner, self._max_attempts
        deadlines, expired = self._deadlines, self._expired
        while True:
            if not queue:
                future = self._loop.create_future()
                self._idle.append(future)
                await future
                continue
            i = queue.popleft()
            attempt, error = 0, None
            while attempt < max_attempts[i]:
                attempt += 1
                call = self._begin_attempt(i, attempt, slot)
                try:
                    result = await runner.run(call)
                except asyncio.CancelledError:
                    if self._stopping or not expired[slot]:
                        raise
                    result = None
                except Exception as exc:  # a runner bug fails the attempt, never the run
                    result = NodeResult(None, error=f"runner error: {type(exc).__name__}: {exc}")
                finally:
                    deadlines[slot] = _INF
                error = self._timed_out(i, slot) if expired[slot] else self._record(i, result)
                if error is None:
                    break
            self._settle(i, error)

    def _begin_attempt(self, i: int, attempt: int, slot: int) -> NodeCall:
        """Count the attempt, arm its deadline, and build the call."""
        start = self._clock()
        if attempt == 1:
            self._started[i] = start - self._t0
        self._attempts[i] = attempt
        timeout = self._timeout[i]
        deadline = self._deadlines[slot] = start + timeout
        if deadline < self._watchdog_at:
            self._arm_watchdog(deadline)
        return NodeCall(
            self._task_id, self._ids[i], self._subnet[i], self._action[i],
            self._params[i], timeout, attempt,  # type: ignore[arg-type]
        )

    def _timed_out(self, i: int, slot: int) -> str:
        """The watchdog cancelled this attempt: recover the worker and count a timeout.

        A result that arrived although the watchdog fired (the runner swallowed
        the cancellation) is a timeout all the same.
        """
        self._expired[slot] = False
        self._tasks[slot].uncancel()
        self._timeouts[i] += 1
        return f"timeout after {self._timeout[i]}s"

    def _record(self, i: int, result: object) -> str | None:
        """Charge one completed attempt; store the output on success, else return the error."""
        if not isinstance(result, NodeResult):
            return f"runner returned {type(result).__name__}, not NodeResult"
        cost = result.cost_tao
        if type(cost) is not float and type(cost) is not int or not 0 <= cost < _INF:
            return f"runner reported an invalid cost: {cost!r}"
        self._cost[i] += cost
        self._spent += cost
        extra = result.unplanned_retries
        if type(extra) is int and extra > 0:
            self._unplanned[i] += extra
        output = result.output
        if output is None:
            return result.error or "no output"
        if not isinstance(output, NodeOutput):
            return f"runner returned malformed output ({type(output).__name__})"
        self._outputs[self._ids[i]] = output.as_dict()
        return None

    def _settle(self, i: int, error: str | None) -> None:
        """Finish a node that ran (``error`` is None on success) and dispatch what follows."""
        self._t_last = self._finished[i] = self._clock() - self._t0
        self._inflight -= 1
        self._reserved = self._reserved - self._estimate[i] if self._inflight else 0.0
        if error is None and self._on_event is None:  # the hot path: no Event to build
            self._status[i] = SUCCESS
        else:
            self._set(i, SUCCESS if error is None else FAILED, error)
        if not self._halted:  # once halted, the scheduler is no longer consulted
            self._sched.done(i)
            self._pump()
        if self._inflight == 0:
            self._check_finished()

    # -- timeouts -------------------------------------------------------------------------

    def _arm_watchdog(self, when: float) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._watchdog_at = when
        self._watchdog = self._loop.call_at(when, self._on_watchdog)

    def _on_watchdog(self) -> None:
        """Cancel every overdue attempt, then re-arm for the earliest one left."""
        self._watchdog = None
        self._watchdog_at = _INF
        now = self._loop.time() + _WATCHDOG_SLACK_S
        deadlines = self._deadlines
        for slot, deadline in enumerate(deadlines):
            if deadline <= now:
                deadlines[slot] = _INF
                self._expired[slot] = True
                self._tasks[slot].cancel()
        earliest = min(deadlines, default=_INF)
        if earliest < _INF:
            self._arm_watchdog(earliest)

    # -- state and events -----------------------------------------------------------------

    def _now(self) -> float:
        return self._clock() - self._t0

    def _on_ready(self, i: int) -> None:
        self._set(i, READY, None)

    def _set(self, i: int, new: str, reason: str | None) -> None:
        old = self._status[i]
        self._status[i] = new
        self._reason[i] = reason
        if self._on_event is not None:
            self._on_event(Event(self._now(), self._ids[i], old, new, reason))

    # -- the outcome ----------------------------------------------------------------------

    def result(self, check: PlanCheck) -> Execution:
        ids, status, outputs = self._ids, self._status, self._outputs
        records = map(
            NodeRecord, status, self._reason, self._attempts, self._cost, self._started,
            self._finished, map(outputs.get, ids), self._timeouts, self._unplanned,
        )
        nodes = dict(zip(ids, records))
        output_node = self._output_node()
        return Execution(
            status=_overall(status), errors=[], nodes=nodes, metrics=self._metrics(),
            budget_ceiling=self._ceiling, tiers=check.tiers, critical_path_s=check.critical_path_s,
            final_output=outputs.get(output_node) if output_node is not None else None,
            output_node=output_node, total_steps=len(ids),
        )

    def _metrics(self) -> RunMetrics:
        status = self._status
        latency = 0.0
        if self._t_first is not None and self._t_last is not None:
            latency = max(0.0, self._t_last - self._t_first)
        return RunMetrics(
            completion_ratio=status.count(SUCCESS) / len(status),
            latency_s=latency,
            cost_tao=sum(self._cost),
            retries=sum(a - 1 for a in self._attempts if a > 1),
            unplanned_retries=sum(self._unplanned),
            timeouts=sum(self._timeouts),
            hard_failures=status.count(FAILED) + status.count(BLOCKED),
        )

    def _output_node(self) -> str | None:
        """The output node; else the single sink; else the last sink that succeeded."""
        if self._plan.output_node is not None:
            return self._plan.output_node
        sinks = [i for i, succs in enumerate(self._succs) if not succs]
        if len(sinks) == 1:
            return self._ids[sinks[0]]
        for i in reversed(sinks):
            if self._status[i] == SUCCESS:
                return self._ids[i]
        return None


def _prepared_params(
    ids: list[str], index: dict[str, int], compiled: dict[str, CompiledParams]
) -> tuple[list[dict | None], list[tuple[int, ...]]]:
    """Per node: its params if they hold no ref (else None, resolved at dispatch),
    and the nodes it references in order of first reference."""
    params: list[dict | None] = [None] * len(ids)
    sources: list[tuple[int, ...]] = [()] * len(ids)
    for i, node_id in enumerate(ids):
        c = compiled.get(node_id)
        if c is None:
            continue  # statically blocked
        if c.refs:
            sources[i] = tuple(dict.fromkeys(index[ref.node_id] for ref in c.refs))
        else:
            params[i] = c.resolve(_NO_OUTPUTS)
    return params, sources


def _overall(status: list[str]) -> Status:
    if all(s == SUCCESS for s in status):
        return "completed"
    if BUDGET_ABORT in status:
        return "budget_abort"
    return "partial"
