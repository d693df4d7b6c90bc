"""Run untrusted Python in a fresh work dir under the strongest isolation available.

The parent never holds more than ``max_output_bytes`` per stream, kills the whole
run at ``wall_seconds`` and deletes the work dir afterwards, whatever happened.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import cache
from pathlib import PurePosixPath
from typing import Any, TypeVar

from .isolation import NONE, Isolation, candidates
from .models import SandboxLimits, SandboxResult, SandboxUnavailable

T = TypeVar("T")

PRIVATE_ISOLATION = "bwrap"
"""The one isolation whose runs see nothing of the caller's files (docs/sandbox.md)."""

_CHUNK = 64 * 1024
_KILL_GRACE_S = 2.0  # after the kill, how long the pipes may take to close
_PROBE_LIMITS = SandboxLimits(cpu_seconds=5, wall_seconds=15)


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
        return pool.submit(asyncio.run, job).result()


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
    with _workdir(files, uid) as host_dir:
        started = time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            *isolation.command(host_dir, list(args), limits, uid),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=host_dir,
            env=isolation.env(host_dir),
            start_new_session=True,  # its own group: the wall-timeout kill takes all of it
        )
        out, err = _Capture(limits.max_output_bytes), _Capture(limits.max_output_bytes)
        returncode, timed_out = await _supervise(proc, stdin.encode("utf-8"), out, err, limits.wall_seconds)
        return SandboxResult(
            returncode=returncode,
            stdout=out.text(),
            stderr=err.text(),
            timed_out=timed_out,
            output_truncated=out.truncated or err.truncated,
            wall_s=time.monotonic() - started,
            isolation=isolation.name,
        )


async def _supervise(
    proc: asyncio.subprocess.Process, data: bytes, out: _Capture, err: _Capture, wall_s: float
) -> tuple[int | None, bool]:
    """Feed stdin, drain both pipes and wait; kill the group at the wall timeout or
    when the caller is cancelled.

    The run is over when the process has exited AND its pipes are closed, so a
    child that outlives its parent while holding stdout still counts as running.
    """
    assert proc.stdin and proc.stdout and proc.stderr
    io = asyncio.gather(_feed(proc.stdin, data), _drain(proc.stdout, out), _drain(proc.stderr, err))
    exited = asyncio.ensure_future(proc.wait())
    try:
        _, pending = await asyncio.wait({io, exited}, timeout=wall_s)
    except asyncio.CancelledError:
        await _stop(proc.pid, exited, io)
        raise
    if not pending:
        return _shell_status(exited.result()), False
    await _stop(proc.pid, exited, io)
    return None, True


async def _stop(pgid: int, exited: asyncio.Future[int], io: asyncio.Future[object]) -> None:
    """Kill the run's group, reap it, and give its pipes a moment to close: once they
    have, no process of the run is left holding them."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
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

