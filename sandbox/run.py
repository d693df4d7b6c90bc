"""Run untrusted Python in a fresh work dir under the strongest isolation available.

The parent never holds more than ``max_output_bytes`` per stream, kills the whole
run at ``wall_seconds`` and deletes the work dir afterwards, whatever happened.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from pathlib import PurePosixPath
from typing import Any, TypeVar

from .cgroup import RunGroup, run_group
from .isolation import NONE, Isolation, candidates
from .models import SandboxLimits, SandboxResult, SandboxUnavailable

T = TypeVar("T")

PRIVATE_ISOLATION = "bwrap"
"""The one isolation whose runs see nothing of the caller's files (docs/sandbox.md)."""

_CHUNK = 64 * 1024
_KILL_GRACE_S = 2.0  # after the kill, how long the pipes may take to close
_PROBE_LIMITS = SandboxLimits(cpu_seconds=5, wall_seconds=15)
_STOP_AT: ContextVar[float | None] = ContextVar("sandbox_stop_at", default=None)


class RunStopped(Exception):
    """A run reached its caller's stop time (:func:`stopping_at`) before its own limits
    ended it: it was killed, and there is no result to judge it by."""


@contextmanager
def stopping_at(when: float) -> Iterator[None]:
    """Every run started in this context, also from the threads and tasks it hands its
    context to, is killed at ``when`` (``time.monotonic()``) at the latest and raises
    :class:`RunStopped` then; one started after ``when`` raises it at once."""
    token = _STOP_AT.set(when)
    try:
        yield
    finally:
        _STOP_AT.reset(token)


def run_python(
    files: dict[str, str],
    args: list[str],
    *,
    stdin: str = "",
    limits: SandboxLimits = SandboxLimits(),
) -> SandboxResult:
    """Blocking form of :func:`run_python_async`.

    Called from a thread whose event loop is running, it blocks that loop for the
    whole run: async callers should await :func:`run_python_async` instead.
    """
    return run_sync(run_python_async(files, args, stdin=stdin, limits=limits))


def run_sync(job: Coroutine[Any, Any, T]) -> T:
    """Run a sandbox coroutine to completion from synchronous code, in a fresh loop
    (on a helper thread when this thread's loop is already running)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(job)
    with ThreadPoolExecutor(max_workers=1) as pool:  # this thread's loop is busy: use a fresh one
        return pool.submit(contextvars.copy_context().run, asyncio.run, job).result()


async def run_python_async(
    files: dict[str, str],
    args: list[str],
    *,
    stdin: str = "",
    limits: SandboxLimits = SandboxLimits(),
) -> SandboxResult:
    """Run ``python -I -B <args>`` in a fresh directory holding ``files``.

    ``files`` maps relative paths to their text. Raises ``ValueError`` for a path
    that leaves the work dir and :class:`SandboxUnavailable` when nothing on this
    machine can isolate the code.
    """
    isolation = await asyncio.to_thread(_detect)
    if isolation.kind == "none":
        raise SandboxUnavailable("no sandbox works here: see isolation_available() and docs/sandbox.md")
    return await _run(isolation, files, args, stdin=stdin, limits=limits)


def isolation_available() -> str:
    """The isolation runs get on this machine: ``bwrap``, a fallback such as
    ``rlimits+netns+nobody``, or ``none``. Probed once per process."""
    return _detect().name


@cache
def _detect() -> Isolation:
    as_root = os.geteuid() == 0
    for isolation in candidates(as_root=as_root):
        if _probe(isolation):
            return isolation
    return NONE


def _probe(isolation: Isolation) -> bool:
    """Whether ``isolation`` can start the interpreter (and drop root, if needed)."""
    try:
        uid = isolation.run_uid()
        with _workdir({}, uid) as host_dir:
            done = subprocess.run(
                isolation.command(host_dir, ["-c", "pass"], _PROBE_LIMITS, uid),
                env=isolation.env(host_dir),
                cwd=host_dir,
                capture_output=True,
                timeout=_PROBE_LIMITS.wall_seconds,
                start_new_session=True,
            )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


async def _run(
    isolation: Isolation, files: dict[str, str], args: list[str], *, stdin: str, limits: SandboxLimits
) -> SandboxResult:
    uid = isolation.run_uid()
    wall_s, stopped = _wall(limits)
    with _workdir(files, uid) as host_dir, run_group(limits) as group:
        started = time.monotonic()
        argv = _bounded(isolation, group, host_dir, list(args), limits, uid)
        out, err = _Capture(limits.max_output_bytes), _Capture(limits.max_output_bytes)
        returncode, timed_out = await _execute(
            argv, host_dir, isolation.env(host_dir), stdin.encode("utf-8"), out, err, wall_s, group
        )
        if timed_out and stopped:
            raise RunStopped(f"stopped at its caller's stop time, after {time.monotonic() - started:.1f}s")
        return SandboxResult(
            returncode=returncode,
            stdout=out.text(),
            stderr=err.text(),
            timed_out=timed_out,
            output_truncated=out.truncated or err.truncated,
            wall_s=time.monotonic() - started,
            isolation=isolation.name,
            memory_peak_bytes=group.peak_bytes() if group else None,
        )


def _wall(limits: SandboxLimits) -> tuple[float, bool]:
    """The run's wall limit, and whether it is the caller's stop time rather than its own."""
    stop_at = _STOP_AT.get()
    if stop_at is None:
        return limits.wall_seconds, False
    left = stop_at - time.monotonic()
    if left <= 0:
        raise RunStopped("its caller's stop time had passed: not started")
    return min(left, limits.wall_seconds), left < limits.wall_seconds


def _bounded(
    isolation: Isolation, group: RunGroup | None, host_dir: str, args: list[str], limits: SandboxLimits, uid: int | None
) -> list[str]:
    """The run's command, its whole process tree bounded together: inside ``group``, or,
    without one, under the per-process limits whose product bounds the total."""
    if group is None:
        return isolation.command(host_dir, args, limits.without_cgroup(), uid)
    return group.enter(isolation.command(host_dir, args, limits, uid))


_Watched = tuple["asyncio.Future[tuple[None, None, None]]", "asyncio.Future[int]"]
"""The run's pipes (fed and drained, done when all are closed) and its exit."""


async def _execute(
    argv: list[str],
    cwd: str,
    env: dict[str, str],
    data: bytes,
    out: _Capture,
    err: _Capture,
    wall_s: float,
    group: RunGroup | None,
) -> tuple[int | None, bool]:
    """Start the run and supervise it, inside one block that kills the run's group
    however it is left: at the wall timeout, or on the caller's cancellation, even one
    that arrives while the process is still starting.

    The start itself is shielded: cancelled half-way, asyncio would kill only the first
    process (bwrap), and bwrap's own children, not yet bound to its life, kept running.
    Instead the start is let finish and the whole group is killed then.
    """
    starting = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,  # its own group: the kill takes all of it
        )
    )
    watched: _Watched | None = None
    try:
        proc = await asyncio.shield(starting)
        watched = _watch(proc, data, out, err)
        _, pending = await asyncio.wait(watched, timeout=wall_s)
    except asyncio.CancelledError:
        await _despite_cancellation(_stop_started(starting, watched, group))
        raise
    if not pending:
        return _shell_status(watched[1].result()), False  # the exit: proc.wait() is done
    await _stop(proc.pid, watched, group)
    return None, True


def _watch(proc: asyncio.subprocess.Process, data: bytes, out: _Capture, err: _Capture) -> _Watched:
    assert proc.stdin and proc.stdout and proc.stderr
    io = asyncio.gather(_feed(proc.stdin, data), _drain(proc.stdout, out), _drain(proc.stderr, err))
    return io, asyncio.ensure_future(proc.wait())


async def _stop_started(
    starting: asyncio.Future[asyncio.subprocess.Process], watched: _Watched | None, group: RunGroup | None
) -> None:
    """Once the start is over, stop whatever it started."""
    try:
        proc = await starting
    except OSError:
        return  # nothing started
    await _stop(proc.pid, watched or _watch(proc, b"", _Capture(0), _Capture(0)), group)


async def _despite_cancellation(cleanup: Coroutine[Any, Any, None]) -> None:
    """Run ``cleanup`` to its end even if the caller is cancelled again meanwhile."""
    task = asyncio.ensure_future(cleanup)
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            continue
    task.result()


async def _stop(pgid: int, watched: _Watched, group: RunGroup | None) -> None:
    """Kill the run's process group and cgroup, reap it, and give its pipes a moment to
    close: once they have, no process of the run is left holding them."""
    io, exited = watched
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if group is not None:
        await asyncio.to_thread(group.kill)  # whatever left the process group
    await exited
    _, unclosed = await asyncio.wait({io}, timeout=_KILL_GRACE_S)
    for task in unclosed:  # a process escaped the group and kept a pipe open
        task.cancel()


def _shell_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


async def _feed(writer: asyncio.StreamWriter, data: bytes) -> None:
    try:
        if data:
            writer.write(data)
            await writer.drain()
        writer.close()
        await writer.wait_closed()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the program stopped reading: its business


async def _drain(reader: asyncio.StreamReader, capture: _Capture) -> None:
    while chunk := await reader.read(_CHUNK):
        capture.feed(chunk)


class _Capture:
    """Keeps the first ``cap`` bytes of a stream and counts the rest away."""

    __slots__ = ("_cap", "_chunks", "_size", "truncated")

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._chunks: list[bytes] = []
        self._size = 0
        self.truncated = False

    def feed(self, chunk: bytes) -> None:
        room = self._cap - self._size
        if len(chunk) > room:
            self.truncated = True
            chunk = chunk[: max(room, 0)]
        if chunk:
            self._chunks.append(chunk)
            self._size += len(chunk)

    def text(self) -> str:
        return b"".join(self._chunks).decode("utf-8", errors="replace")


@contextmanager
def _workdir(files: dict[str, str], uid: int | None) -> Iterator[str]:
    """A fresh private directory holding ``files``, owned by the uid the run uses."""
    paths = {_relative(name): text for name, text in files.items()}
    host_dir = tempfile.mkdtemp(prefix="dagnet-sandbox-")
    try:
        for relative, text in paths.items():
            target = os.path.join(host_dir, *relative.parts)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8") as handle:
                handle.write(text)
        if uid is not None:
            _chown_tree(host_dir, uid)
        yield host_dir
    finally:
        shutil.rmtree(host_dir, ignore_errors=True)


def _relative(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts or path == PurePosixPath("."):
        raise ValueError(f"sandbox file name must be a relative path inside the work dir: {name!r}")
    return path


def _chown_tree(root: str, uid: int) -> None:
    os.chown(root, uid, uid)
    for parent, dirs, names in os.walk(root):
        for name in (*dirs, *names):
            os.chown(os.path.join(parent, name), uid, uid)
