"""What a reference tool is, and the registry that names them.

A tool is an async function ``(params, ctx) -> ToolResult``; a generator tool
(``ToolSpec.frames``) is an async generator ``(params, ctx)`` yielding one
``ToolResult`` per frame, each with the cost of that frame. A tool raises
:class:`ToolError` for a clean failure (bad params, nothing found); anything
else it raises is reported as an internal tool error by the caller. Tools are
deterministic and touch no network unless explicitly configured.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from protocol.runner import WORK_LEFT_S, NodeCall, NodeResult
from sandbox.lifetime import exit_with_parent


class ToolError(Exception):
    """A tool failed cleanly; the message is safe to show to the caller."""

    def __init__(self, message: str, *, cost_tao: float = 0.0) -> None:
        super().__init__(message)
        self.cost_tao = cost_tao

    def __reduce__(self) -> tuple[Any, ...]:
        # Crosses from a tool process whole, its cost included.
        return (_tool_error, (type(self), str(self), self.cost_tao))


def _tool_error(cls: type[ToolError], message: str, cost_tao: float) -> ToolError:
    return cls(message, cost_tao=cost_tao)


@dataclass(slots=True)
class ToolContext:
    """A tool's view of the :class:`~protocol.runner.NodeCall` it serves: which node,
    which attempt, and how long it has (its params come separately; its subnet is none
    of its business)."""

    task_id: str
    node_id: str
    attempt: int  # 1-based
    timeout_seconds: float

    @classmethod
    def of(cls, call: NodeCall) -> ToolContext:
        return cls(call.task_id, call.node_id, call.attempt, call.timeout_seconds)


ToolResult = NodeResult
"""A tool answers with a node's outcome: its ``output`` and the ``cost_tao`` of making it
(a failure is raised as :class:`ToolError`, so ``error`` stays unset)."""


Tool = Callable[[dict[str, Any], ToolContext], Awaitable[ToolResult]]
FrameTool = Callable[[dict[str, Any], ToolContext], AsyncGenerator[ToolResult, None]]
BlockingTool = Callable[[dict[str, Any], ToolContext], ToolResult]


def run_in_thread(fn: BlockingTool) -> Tool:
    """A tool that does CPU work: run it in a worker thread so the event loop keeps serving.

    Cancelling the caller returns at once; the thread finishes its (bounded) work
    and its result is dropped.
    """

    async def tool(params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await asyncio.to_thread(fn, params, ctx)

    tool.__name__ = tool.__qualname__ = fn.__name__.lstrip("_")
    tool.__doc__ = fn.__doc__
    return tool


TOOL_CPU_S = 2.0
"""The CPU seconds one call of a process tool (:func:`run_in_process`) may use; past it the
call fails with ``cpu limit exceeded``. A reference call on any family's data takes
milliseconds."""

_POOL: ProcessPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def tool_processes() -> ProcessPoolExecutor:
    """The processes CPU tools run in: one per core, started on first use (spawned, so a
    threaded parent is never forked), replaced if one of them died, and each ending when this
    process does, however it ends (:func:`sandbox.lifetime.exit_with_parent`)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or getattr(_POOL, "_broken", False):
            _POOL = ProcessPoolExecutor(
                os.cpu_count() or 1, mp_context=multiprocessing.get_context("spawn"), initializer=exit_with_parent
            )
        return _POOL


class _Here(Executor):
    """Runs each call at once, in the calling thread."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 — the caller's, through the future
            future.set_exception(exc)
        return future


def run_tools_here() -> None:
    """From now on, CPU tools run in this process, in the calling (main) thread, still
    under their CPU limit: for a process that is itself a supervised worker (a miner's
    planning process, a fork, which must not use the pool it inherited)."""
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = _Here(), threading.Lock()  # type: ignore[assignment]


def run_in_process(fn: BlockingTool, cpu_s: float = TOOL_CPU_S) -> Tool:
    """A tool that does CPU work: run it in :func:`tool_processes`, at most ``cpu_s`` CPU
    seconds a call (less when the attempt has less left, :data:`WORK_LEFT_S`), so the caller's event loop keeps serving and calls from many threads
    use every core instead of sharing one interpreter lock. ``fn`` must be importable by
    name (a module-level function); its params, context and result cross by pickle.
    """

    async def tool(params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        left = WORK_LEFT_S.get()
        limit, what = (cpu_s, f"{cpu_s:g}s") if cpu_s <= left else (left, "what its plan has left")
        return await asyncio.get_running_loop().run_in_executor(
            tool_processes(), _limited, fn, limit, what, params, ctx
        )

    tool.__name__ = tool.__qualname__ = fn.__name__.lstrip("_")
    tool.__doc__ = fn.__doc__
    tool.__wrapped__ = fn  # type: ignore[attr-defined]  # the work itself, to call in this process
    return tool


def _limited(fn: BlockingTool, cpu_s: float, what: str, params: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """Runs in a tool process (its main thread): ``fn`` stopped by SIGPROF after ``cpu_s``
    of CPU time, which fails the call with ``cpu limit exceeded (<what>)``."""

    def exceeded(signum: int, frame: object) -> None:
        raise ToolError(f"cpu limit exceeded ({what})")

    signal.signal(signal.SIGPROF, exceeded)
    signal.setitimer(signal.ITIMER_PROF, cpu_s)
    try:
        return fn(params, ctx)
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A registered tool and what a planner should expect of it."""

    name: str
    fn: Tool
    description: str = ""
    cost_tao: float = 0.0
    latency_s: float = 0.0
    frames: bool = False  # ``fn`` is a FrameTool


@dataclass
class ToolRegistry:
    _tools: dict[str, ToolSpec] = field(default_factory=dict)

    def register(self, spec: ToolSpec) -> None:
        if spec.name in self._tools:
            raise ValueError(f"tool {spec.name!r} is already registered")
        self._tools[spec.name] = spec

    def get(self, name: str) -> ToolSpec | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def call(self, action: str, params: dict[str, Any], ctx: ToolContext) -> Awaitable[ToolResult]:
        """The tool's own coroutine on ``params``, for the caller to await (no second
        coroutine around it); an unknown action raises :class:`ToolError` at once."""
        return self._spec(action, frames=False).fn(params, ctx)

    def frames(self, action: str, params: dict[str, Any], ctx: ToolContext) -> AsyncGenerator[ToolResult, None]:
        """The frames of generator ``action``, one ``ToolResult`` each, as they are made."""
        spec = self._spec(action, frames=True)
        return spec.fn(params, ctx)  # type: ignore[return-value]

    def _spec(self, action: str, *, frames: bool) -> ToolSpec:
        spec = self._tools.get(action)
        if spec is None:
            raise ToolError(f"unknown action {action!r}; known: {', '.join(self.names())}")
        if spec.frames != frames:
            kind = "a generator: it yields frames" if spec.frames else "not a generator: it has one output"
            raise ToolError(f"action {action!r} is {kind}")
        return spec
