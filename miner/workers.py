"""Planning in supervised processes: a planner that spins is stopped, one that exits costs its query.

:class:`PlannerWorkers` keeps ``size`` warm processes, each planning one package at a
time with the miner's planner. The miner's event loop hands a package to an idle
process and waits for its answer:

- past the deadline the process is killed (SIGKILL, with its process group) and the
  query fails ``timeout``; nothing of it keeps running, in the miner or anywhere;
- a process that dies while planning (``os._exit``, a crash, the OOM killer) fails
  its query ``error`` with its exit code;
- a client that goes away kills the process planning for it.

A killed or dead process is replaced by a fresh one when its slot is next used. A
process is a fork of the miner made from a thread of this pool: it starts at once with
the planner already loaded, keeps only its two pipes (every other descriptor, the
miner's sockets among them, is closed), runs the planner's tool calls itself (not in the
miner's tool processes), runs in a session of its own and ends when the miner does. Each answer carries the CPU seconds the process spent on it, which
the miner charges to the validator that asked (:mod:`miner.quota`).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from typing import Any

from planners.base import Planner, PlannerFailure, PlanResult, plan_here
from protocol.synapse import TaskPackage
from sandbox.lifetime import die_with_parent
from subnets.base import run_tools_here

__all__ = ["PlannerWorkers"]


class _Worker:
    """One planning process and the miner's ends of its two pipes."""

    __slots__ = ("pid", "born", "_to", "_from", "_status")

    def __init__(self, planner: Planner) -> None:
        """Fork the process (blocking for the fork only: call from a thread)."""
        theirs_in, ours_out = os.pipe()
        ours_in, theirs_out = os.pipe()
        miner = os.getpid()
        pid = os.fork()
        if pid == 0:  # the planning process: it never returns from here
            code = 1
            try:
                _detach(miner, keep=(theirs_in, theirs_out))
                _serve(Connection(theirs_in, writable=False), Connection(theirs_out, readable=False), planner)
                code = 0
            finally:
                os._exit(code)
        os.close(theirs_in)  # only the child holds its ends: its death is EOF here
        os.close(theirs_out)
        self.pid = pid
        self.born = time.monotonic()
        self._to = Connection(ours_out, readable=False)
        self._from = Connection(ours_in, writable=False)
        self._status: int | None = None

    def exchange(self, package: TaskPackage) -> tuple[Any, ...]:
        """Send ``package``, wait for the answer (blocking: run in a thread)."""
        try:
            self._to.send(package)
            return self._from.recv()
        except (EOFError, OSError):
            self.exit_code()  # reap it: it died, or was killed at the deadline
            raise

    def kill(self) -> None:
        """Kill the process and anything it started (its session's process group). The
        pipes stay open until the thread waiting on them has read the EOF."""
        for kill in (os.killpg, os.kill):  # the group, or the process before it has made its group
            try:
                kill(self.pid, signal.SIGKILL)
                return
            except ProcessLookupError:
                continue

    def alive(self) -> bool:
        if self._status is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped by a thread waiting on it
                return False
            if pid:
                self._status = os.waitstatus_to_exitcode(status)
        return self._status is None

    def exit_code(self) -> int | None:
        """The process's exit code (negative: the signal that killed it), once it has ended (blocking)."""
        if self._status is None:
            try:
                _, status = os.waitpid(self.pid, 0)
                self._status = os.waitstatus_to_exitcode(status)
            except ChildProcessError:  # reaped already
                pass
        return self._status


class PlannerWorkers:
    """``size`` planning processes for ``planner``; :meth:`plan` runs one package on one of them."""

    def __init__(self, planner: Planner, *, size: int) -> None:
        self.name: str = getattr(planner, "name", "?")
        self.size = size
        self.restarts = 0
        """Processes started to replace one that was killed or died."""
        self._planner = planner
        self._idle: asyncio.Queue[_Worker | None] = asyncio.Queue()
        for _ in range(size):
            self._idle.put_nowait(None)  # a slot whose process starts when first used
        self._threads = ThreadPoolExecutor(max_workers=size, thread_name_prefix="dagnet-planning")
        self._live: set[_Worker] = set()
        self._renewed_at = 0.0
        weakref.finalize(self, _stop, self._live, self._threads)

    def warm(self) -> None:
        """Start every slot's process now (blocking, a fork each), so the first queries find them."""
        started = []
        while not self._idle.empty():
            started.append(self._idle.get_nowait() or self._start())
        for worker in started:
            self._idle.put_nowait(worker)

    def renew(self) -> None:
        """The planner (in this process) has changed, e.g. it learned from feedback: each
        planning process is replaced by a fresh fork before it plans again."""
        self._renewed_at = time.monotonic()

    def close(self) -> None:
        """Kill every process; the pool plans nothing more."""
        _stop(self._live, self._threads)

    def pids(self) -> list[int]:
        """The planning processes alive now."""
        return [worker.pid for worker in self._live if worker.alive()]

    async def plan(self, package: TaskPackage, *, timeout_s: float) -> tuple[PlanResult | PlannerFailure, float]:
        """The planner's answer (or the failure it amounts to) and the CPU seconds it took.

        Waits for an idle process; the deadline runs from when one has the package.
        """
        worker = await self._idle.get()
        loop = asyncio.get_running_loop()
        try:
            if worker is not None and worker.born < self._renewed_at:
                worker = await loop.run_in_executor(self._threads, self._refork, worker)
            running = worker if worker is not None else await loop.run_in_executor(self._threads, self._start)
            worker = running  # the slot's process, None once retired
            started = time.monotonic()
            try:
                async with asyncio.timeout(timeout_s):
                    reply = await loop.run_in_executor(self._threads, running.exchange, package)
            except TimeoutError:
                self._retire(running)
                worker = None
                return PlannerFailure("timeout", f"the planner did not answer within {timeout_s:g}s"), timeout_s
            except (EOFError, OSError):
                code = await loop.run_in_executor(self._threads, running.exit_code)
                self._retire(running)
                worker = None
                failure = PlannerFailure("error", f"the planner's process exited (code {code}) while planning")
                return failure, time.monotonic() - started
            return _outcome(reply)
        except BaseException:  # cancelled (the client left): the planning stops with the request
            if worker is not None:
                self._retire(worker)
            worker = None
            raise
        finally:
            self._idle.put_nowait(worker)

    def _start(self) -> _Worker:
        worker = _Worker(self._planner)
        self._live.add(worker)
        return worker

    def _refork(self, worker: _Worker) -> _Worker:
        """An idle ``worker`` replaced by a fork of the planner as it is now."""
        worker.kill()
        worker.exit_code()
        self._live.discard(worker)
        return self._start()

    def _retire(self, worker: _Worker) -> None:
        """Kill ``worker``; its slot launches a fresh process when next used."""
        worker.kill()
        self._live.discard(worker)
        self.restarts += 1
        return None


def _outcome(reply: tuple[Any, ...]) -> tuple[PlanResult | PlannerFailure, float]:
    kind, payload, trace, cpu_s = reply
    return (payload if kind is None else PlannerFailure(kind, payload, trace)), cpu_s


def _stop(live: set[_Worker], threads: ThreadPoolExecutor) -> None:
    for worker in list(live):
        worker.kill()
        worker.exit_code()  # reaped at once: SIGKILL cannot be ignored
    live.clear()
    threads.shutdown(wait=False, cancel_futures=True)


# --- in the planning process -------------------------------------------------------------


def _detach(miner: int, keep: tuple[int, ...]) -> None:
    """Leave the miner behind: a session of its own, no descriptor but stdio and ``keep``,
    no Ctrl-C, and an end when the miner ends, however it ends (even while the planner spins:
    the kernel's SIGKILL, armed before anything else; this process is forked from a thread of
    the pool, which lives as long as the pool)."""
    die_with_parent(miner)
    os.setsid()
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the miner's graceful shutdown
    run_tools_here()  # the tool processes it inherited are the miner's, their threads gone


def _serve(packages: Connection, answers: Connection, planner: Planner) -> None:
    """Plan each package that arrives until the miner's end closes, answering
    ``(failure kind or None, result or reason, traceback or None, CPU seconds)``."""
    while True:
        try:
            package = packages.recv()
        except (EOFError, OSError):
            return
        started = time.process_time()
        try:
            reply: tuple[Any, ...] = (None, plan_here(planner, package), None)
        except PlannerFailure as failure:
            reply = (failure.kind, failure.reason, failure.traceback)
        cpu_s = time.process_time() - started
        try:
            answers.send((*reply, cpu_s))
        except Exception as exc:  # an answer that does not pickle
            answers.send(("invalid", f"the planner's answer cannot be sent back: {type(exc).__name__}", None, cpu_s))
