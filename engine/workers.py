"""Workers and the watchdog: the tasks that run dispatched nodes' attempts through the
runner, one :class:`_Slot` per worker, and the one timer that enforces every attempt's
timeout.

The workers see the run through :class:`AttemptHost`, what a run offers them (the
executor's run satisfies it); this module imports nothing of the executor.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Callable
from typing import Protocol

from protocol.runner import NodeCall, NodeResult, NodeRunner

from .model import BUDGET_REASON, Attempt
from .nodes import _Node

__all__ = ["AttemptHost", "Pool", "Watchdog"]

_INF = math.inf
# The watchdog may fire a hair before its deadline (the loop's clock resolution).
_WATCHDOG_SLACK_S = 1e-4


class AttemptHost(Protocol):
    """What a run offers the workers that run its nodes' attempts."""

    clock: Callable[[], float]
    """The loop's clock, in seconds."""
    t0: float
    """When the run started, on ``clock``."""
    task_id: str

    def retry_refused(self, node: _Node) -> bool:
        """Whether the budget refuses another attempt of ``node`` (the run then halts)."""
        ...

    def record(self, node: _Node, result: object) -> str | None:
        """Charge one completed attempt; ``None`` on success, else the attempt's error."""
        ...

    def timed_out(self, node: _Node) -> str:
        """Count a timed-out attempt; returns its error."""
        ...

    def settle(self, node: _Node, error: str | None) -> None:
        """``node`` ran its last attempt (``error`` is ``None`` on success)."""
        ...

    async def frames(self, node: _Node, call: NodeCall) -> NodeResult:
        """Run one attempt of generator ``node``, taking its frames as they come."""
        ...

    def worker_exited(self, task: asyncio.Task[None]) -> None:
        """A worker's task ended (only a bug ends one other than by cancellation)."""
        ...


class _Slot:
    """One worker: its task, the deadline of the attempt it runs (``inf`` when none) and
    whether the watchdog cancelled that attempt."""

    __slots__ = ("task", "deadline", "expired")

    def __init__(self) -> None:
        self.task: asyncio.Task[None] | None = None  # set as soon as the worker's task exists
        self.deadline = _INF
        self.expired = False


class Watchdog:
    """The run's clocks: one timer for every attempt's deadline, and the global deadline.

    A worker writes its current attempt's deadline into its :class:`_Slot` and calls
    :meth:`arm` when that is earlier than ``next_at``; so the timer is always armed at
    the earliest. When it fires, overdue slots are marked ``expired`` and their tasks
    cancelled.
    """

    __slots__ = ("_loop", "slots", "next_at", "_timer")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.slots: list[_Slot] = []
        self.next_at = _INF  # when the timer fires; inf when it is not armed
        self._timer: asyncio.TimerHandle | None = None

    def watch(self, slot: _Slot) -> None:
        self.slots.append(slot)

    def arm(self, when: float) -> None:
        """Fire at loop time ``when`` instead of ``next_at``."""
        if self._timer is not None:
            self._timer.cancel()
        self.next_at = when
        self._timer = self._loop.call_at(when, self._fire)

    @staticmethod
    def recover(slot: _Slot) -> None:
        """The slot's task took the watchdog's cancellation as a timeout; clear it."""
        slot.expired = False
        slot.task.uncancel()  # type: ignore[union-attr]

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
        earliest = _INF
        for slot in self.slots:
            if slot.deadline <= now:
                slot.deadline = _INF
                slot.expired = True
                slot.task.cancel()  # type: ignore[union-attr]
            elif slot.deadline < earliest:
                earliest = slot.deadline
        if earliest < _INF:
            self.arm(earliest)


class Pool:
    """Worker tasks serving the queue of dispatched nodes, at most ``max_workers``.

    A worker runs every attempt of a node through the runner and hands the
    outcome to the run (``record``, ``timed_out``, ``settle``).
    """

    __slots__ = (
        "_loop",
        "_run",
        "_runner",
        "_watchdog",
        "_max_workers",
        "queue",
        "_idle",
        "_tasks",
        "_wake_handle",
        "_stopping",
    )

    def __init__(self, run: AttemptHost, runner: NodeRunner, watchdog: Watchdog, max_workers: int) -> None:
        self._loop = asyncio.get_running_loop()
        self._run = run
        self._runner = runner
        self._watchdog = watchdog
        self._max_workers = max_workers
        self.queue: deque[_Node] = deque()  # dispatched nodes no worker has taken yet: the run appends
        self._idle: list[asyncio.Future[None]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._wake_handle: asyncio.Handle | None = None
        self._stopping = False  # workers are being cancelled; never a timeout then

    def dispatched(self) -> None:
        """The run appended nodes to ``queue``: wake workers for them one loop turn later."""
        if self._wake_handle is None and self._tasks and self.queue:
            self._wake_handle = self._loop.call_soon(self.wake)

    def wake(self) -> None:
        """Give every queued node a worker: wake idle ones, then spawn up to the cap.

        Called one loop turn after a dispatch, so nodes that the dispatching worker
        already ran without suspending need no other worker at all.
        """
        self._wake_handle = None
        need = len(self.queue)
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
        slot = _Slot()
        task = slot.task = self._loop.create_task(self._worker(slot))
        task.add_done_callback(self._run.worker_exited)
        self._tasks.append(task)
        self._watchdog.watch(slot)

    async def _worker(self, slot: _Slot) -> None:
        """Serve the queue: run every attempt of a node, settle it, park when idle.

        The runner's coroutine is awaited right here (no task per node), so a
        runner that answers without suspending costs no loop turn at all.
        """
        queue, run_node, run, watchdog = self.queue, self._runner.run, self._run, self._watchdog
        clock, t0, task_id, record, settle = run.clock, run.t0, run.task_id, run.record, run.settle
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
                deadline = slot.deadline = start + node.timeout
                if deadline < watchdog.next_at:
                    watchdog.arm(deadline)
                # The attempt starts: count it (inlined, as it runs once per node).
                node.last_started_s = started = start - t0
                if attempt == 1:
                    node.started_s = started
                node.attempts = attempt
                call = NodeCall(task_id, node.id, node.subnet, node.action, node.params, node.timeout, attempt)  # type: ignore[arg-type]
                try:
                    result = await (run.frames(node, call) if node.emits else run_node(call))
                except asyncio.CancelledError:
                    if self._stopping or not slot.expired:
                        raise
                    result = None
                except Exception as exc:  # a runner bug fails the attempt, never the run
                    result = NodeResult(None, error=f"runner error: {type(exc).__name__}: {exc}")
                finally:
                    slot.deadline = _INF
                if slot.expired:
                    # A result that arrived although the watchdog fired (the runner
                    # swallowed the cancellation) is a timeout all the same.
                    watchdog.recover(slot)
                    error = run.timed_out(node)
                else:
                    error = record(node, result)
                if error is None or node.emitted or attempt == node.max_attempts:  # no retry after a frame
                    break
                node.retried = (*node.retried, Attempt(start - t0, clock() - t0, error))
            settle(node, error)
