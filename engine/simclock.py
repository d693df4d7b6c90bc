"""Simulated time for owned execution: a plan's run takes the time its subnets' profiles
say, whatever the machine is doing, so its score is a pure function of plan, task and seed.

:class:`SimulatedLoop` is an asyncio event loop whose clock (``loop.time()``) starts at 0
and moves only when the loop has nothing left to do at the current instant: it then
jumps to the next timer. Everything the executor does with time — per-attempt timeouts,
the global deadline, a subnet's ``asyncio.sleep(avg_latency)``, the run's latency —
reads this clock, so the same run takes the same simulated seconds on a quiet or a
loaded machine.

Work handed to an executor (``asyncio.to_thread``, ``loop.run_in_executor``: the CPU
tools, the sandbox) runs at the current instant while the loop waits for it: inline, on
the loop's own thread, or in a process of a process pool (the CPU tools), this thread
blocked until it returns. So a tool's CPU time does not count, and there is no second
piece of work whose finishing order could differ between two runs: the loop is
deterministic. What that work costs the machine is measured all the same
(:meth:`SimulatedLoop.work_s`), for the plan's allowance (:mod:`engine.owned`).

What must not run on this loop: real network or subprocess I/O awaited *on* it (an
adapter calling a remote provider). Waiting on a socket leaves the loop idle, and an
idle loop with a timer pending jumps to that timer; those runs use an ordinary loop and
the wall clock (:func:`run_simulated` is for owned execution only). Blocking calls that
start their own loop on a helper thread (:func:`sandbox.run_python`) are fine: they run
inline and the simulated clock stands still meanwhile.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor, ProcessPoolExecutor
from typing import Any, TypeVar, TypeVarTuple

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

__all__ = ["SimulatedLoop", "run_simulated"]


class SimulatedLoop(asyncio.SelectorEventLoop):
    """An event loop on simulated time (see the module)."""

    def __init__(self) -> None:
        super().__init__()
        self._now = 0.0
        self._elsewhere_s = 0.0

    def time(self) -> float:
        return self._now

    def work_s(self) -> float:
        """Real seconds of work done for this loop so far (compare two readings): its
        thread's CPU time, the CPU time of what it ran in a process pool, and the wall time
        its inline executor calls waited without using this thread's CPU (a sandboxed
        program, a model's answer)."""
        return time.thread_time() + self._elsewhere_s

    def run_in_executor(self, executor: Executor | None, func: Callable[[*Ts], T], *args: *Ts) -> asyncio.Future[T]:
        """Run ``func`` now and return its settled future (see the module): inline, or, for a
        process pool, in one of its processes while this thread waits."""
        future: asyncio.Future[T] = self.create_future()
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            if isinstance(executor, ProcessPoolExecutor):
                ok, value, used = executor.submit(_measured, func, *args).result()
                self._elsewhere_s += used
                future.set_result(value) if ok else future.set_exception(value)
            else:
                try:
                    future.set_result(func(*args))
                finally:
                    waited = (time.perf_counter() - wall) - (time.thread_time() - cpu)
                    self._elsewhere_s += waited if waited > 0 else 0.0
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            future.set_exception(exc)
        return future

    def _run_once(self) -> None:
        """With nothing ready, move the clock to the earliest live timer first; the base
        loop then polls without blocking and runs that timer's callbacks."""
        if not self._ready:  # type: ignore[attr-defined]  # BaseEventLoop's private state: not in typeshed
            scheduled = self._scheduled  # type: ignore[attr-defined]  # (as above)
            while scheduled and scheduled[0]._cancelled:
                self._timer_cancelled_count -= 1  # type: ignore[attr-defined]  # (as above)
                handle = heapq.heappop(scheduled)
                handle._scheduled = False
            if scheduled and scheduled[0]._when > self._now:
                self._now = scheduled[0]._when
        super()._run_once()  # type: ignore[misc]  # (as above)


def _measured(func: Callable[..., T], *args: Any) -> tuple[bool, Any, float]:
    """Runs in a pool's process: whether ``func`` returned, what it returned or raised,
    and the CPU seconds it took."""
    start = time.process_time()
    try:
        return True, func(*args), time.process_time() - start
    except Exception as exc:
        return False, exc, time.process_time() - start


def run_simulated(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on a fresh :class:`SimulatedLoop` in this thread.

    Blocks the calling thread; async callers hand it to a worker thread. Tasks the
    coroutine leaves behind are cancelled, as :func:`asyncio.run` does.
    """
    loop = SimulatedLoop()
    try:
        return loop.run_until_complete(main)
    finally:
        try:
            _cancel_all(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    pending = asyncio.all_tasks(loop)
    if not pending:
        return
    for task in pending:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
