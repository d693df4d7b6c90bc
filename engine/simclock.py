"""Simulated time for owned execution: a plan's run takes the time its subnets' profiles
say, whatever the machine is doing, so its score is a pure function of plan, task and seed.

:class:`SimulatedLoop` is an asyncio event loop whose clock (``loop.time()``) starts at 0
and moves only when the loop has nothing left to do at the current instant: it then
jumps to the next timer. Everything the executor does with time — per-attempt timeouts,
the global deadline, a subnet's ``asyncio.sleep(avg_latency)``, the run's latency —
reads this clock, so the same run takes the same simulated seconds on a quiet or a
loaded machine.

Work handed to an executor (``asyncio.to_thread``, ``loop.run_in_executor``: the CPU
tools, the sandbox) runs inline, on the loop's own thread, at the current instant. So a
tool's CPU time does not count, and there is no second thread whose finishing order
could differ between two runs: the loop is single-threaded and deterministic.

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
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["SimulatedLoop", "run_simulated"]


class SimulatedLoop(asyncio.SelectorEventLoop):
    """An event loop on simulated time (see the module)."""

    def __init__(self) -> None:
        super().__init__()
        self._now = 0.0

    def time(self) -> float:
        return self._now

    def run_in_executor(self, executor: Executor | None, func: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Run ``func`` now, inline, and return its settled future (see the module)."""
        future: asyncio.Future[T] = self.create_future()
        try:
            future.set_result(func(*args))
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            future.set_exception(exc)
        return future

    def _run_once(self) -> None:
        """With nothing ready, move the clock to the earliest live timer first; the base
        loop then polls without blocking and runs that timer's callbacks."""
        if not self._ready:
            scheduled = self._scheduled
            while scheduled and scheduled[0]._cancelled:
                self._timer_cancelled_count -= 1
                handle = heapq.heappop(scheduled)
                handle._scheduled = False
            if scheduled and scheduled[0]._when > self._now:
                self._now = scheduled[0]._when
        super()._run_once()


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
