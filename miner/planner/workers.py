"""Planning in supervised processes: a planner that spins is stopped, one that exits costs its query.

:class:`PlannerWorkers` keeps ``size`` warm processes, each holding its own copy of the
planner (sent pickled) and planning one package at a time. The miner's event loop
hands a package to an idle process and waits for its answer:

- past the deadline the process is killed (SIGKILL) and the query fails ``timeout``;
  nothing of it keeps running, in the miner or anywhere;
- a process that dies while planning (``os._exit``, a crash, the OOM killer) fails
  its query ``error`` with its exit code;
- a client that goes away kills the process planning for it.

A killed or dead process is replaced by a fresh one the next time its slot is used.
Processes fork from a ``forkserver`` that has imported :mod:`miner.planner` once, so a
replacement starts in milliseconds without the miner's threads or sockets. Each
answer carries the CPU seconds its process spent on it, which the miner charges to
the validator that asked (:mod:`miner.quota`).
"""

from __future__ import annotations

import asyncio
import ctypes
import multiprocessing
import os
import pickle
import signal
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from typing import Any

from protocol.synapse import TaskPackage

from .base import Planner, PlannerFailure, PlanResult, run_planner

__all__ = ["PlannerWorkers", "check_sendable"]

START_TIMEOUT_S = 60.0
"""How long a new planning process may take to load its planner (a cold forkserver imports
:mod:`miner.planner` first); the planning deadline starts once it is ready."""

_READY = "ready"
_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(["miner.planner"])  # once, when the forkserver starts
_PR_SET_PDEATHSIG = 1


def check_sendable(planner: Planner) -> None:
    """``ValueError`` when ``planner`` cannot be sent to a planning process (it does not pickle)."""
    try:
        pickle.dumps(planner)
    except Exception as exc:
        name = getattr(planner, "name", type(planner).__name__)
        raise ValueError(f"planner {name!r} cannot run in a planning process: it does not pickle ({exc})") from None


class _Worker:
    """One planning process and the miner's end of its pipe."""

    __slots__ = ("process", "conn")

    def __init__(self, planner: Planner) -> None:
        self.conn, theirs = _CONTEXT.Pipe()
        self.process = _CONTEXT.Process(target=_serve, args=(theirs, planner), name="dagnet-planner", daemon=True)
        self.process.start()
        theirs.close()  # only the child holds its end: its death is EOF here

    def ready(self) -> bool:
        """Wait (blocking) until the process has its planner and says so; False if it never does."""
        try:
            return self.conn.poll(START_TIMEOUT_S) and self.conn.recv() == _READY
        except (EOFError, OSError):
            return False

    def exchange(self, package: TaskPackage) -> tuple[Any, ...]:
        """Send ``package``, wait for the answer (blocking: run in a thread)."""
        self.conn.send(package)
        return self.conn.recv()

    def kill(self) -> None:
        """Kill the process and anything it started (its own process group). The pipe
        stays open until the thread waiting on it has read the EOF."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, TypeError):  # not yet a group leader
            pass
        if self.process.is_alive():
            self.process.kill()

    def exit_code(self) -> int | None:
        self.process.join(1.0)
        return self.process.exitcode


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
        weakref.finalize(self, _stop, self._live, self._threads)

    def warm(self) -> None:
        """Start every process now (blocking), so the first queries find them ready."""
        started = []
        while not self._idle.empty():
            worker = self._idle.get_nowait()
            started.append(worker or self._start())
        for worker in started:
            self._idle.put_nowait(worker)

    def close(self) -> None:
        """Kill every process; the pool plans nothing more."""
        _stop(self._live, self._threads)

    def pids(self) -> list[int]:
        """The planning processes alive now."""
        return [w.process.pid for w in self._live if w.process.is_alive() and w.process.pid is not None]

    async def plan(self, package: TaskPackage, *, timeout_s: float) -> tuple[PlanResult | PlannerFailure, float]:
        """The planner's answer (or the failure it amounts to) and the CPU seconds it took.

        Waits for an idle process first; the deadline runs from when one has the package.
        """
        worker = await self._idle.get()
        loop = asyncio.get_running_loop()
        try:
            if worker is None:
                worker = await loop.run_in_executor(self._threads, self._start)
                if worker is None:
                    return PlannerFailure("error", f"the planning process did not start within {START_TIMEOUT_S:g}s"), 0.0
            started = time.monotonic()
            try:
                async with asyncio.timeout(timeout_s):
                    reply = await loop.run_in_executor(self._threads, worker.exchange, package)
            except TimeoutError:
                worker = self._retire(worker)
                return PlannerFailure("timeout", f"the planner did not answer within {timeout_s:g}s"), timeout_s
            except (EOFError, OSError):
                code = await loop.run_in_executor(self._threads, worker.exit_code)
                worker = self._retire(worker)
                failure = PlannerFailure("error", f"the planner's process exited (code {code}) while planning")
                return failure, time.monotonic() - started
            except BaseException:  # cancelled (the client left): stop the planning with the request
                worker = self._retire(worker)
                raise
            return _outcome(reply)
        finally:
            self._idle.put_nowait(worker)

    def _start(self) -> _Worker | None:
        worker = _Worker(self._planner)
        self._live.add(worker)
        if worker.ready():
            return worker
        worker.kill()
        self._live.discard(worker)
        return None

    def _retire(self, worker: _Worker) -> None:
        """Kill ``worker``; its slot starts a fresh process when next used."""
        worker.kill()
        self._live.discard(worker)
        self.restarts += 1
        return None


def _outcome(reply: tuple[Any, ...]) -> tuple[PlanResult | PlannerFailure, float]:
    kind, payload, cpu_s = reply
    return (payload if kind is None else PlannerFailure(kind, payload)), cpu_s


def _stop(live: set[_Worker], threads: ThreadPoolExecutor) -> None:
    for worker in list(live):
        worker.kill()
    live.clear()
    threads.shutdown(wait=False, cancel_futures=True)


# --- in the planning process -------------------------------------------------------------


def _serve(conn: Connection, planner: Planner) -> None:
    """Plan each package that arrives until the miner's end closes; answer
    ``(failure kind or None, result or reason, CPU seconds)``."""
    os.setpgid(0, 0)  # a group of its own: the kill at the deadline takes its children too
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the miner, which stops us
    loop = asyncio.new_event_loop()
    conn.send(_READY)
    while True:
        try:
            package = conn.recv()
        except (EOFError, OSError):
            return
        started = time.process_time()
        try:
            reply: tuple[Any, ...] = (None, loop.run_until_complete(
                run_planner(planner, package, timeout_s=None, threaded=False)))
        except PlannerFailure as failure:
            reply = (failure.kind, failure.reason)
        cpu_s = time.process_time() - started
        try:
            conn.send((*reply, cpu_s))
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            conn.send(("invalid", f"the planner's answer cannot be sent back: {type(exc).__name__}", cpu_s))


def _die_with_parent() -> None:
    """Be killed when the forkserver (which dies with the miner) does, even while spinning."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: EOF on the pipe still ends an idle process
        pass
