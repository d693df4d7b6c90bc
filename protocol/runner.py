"""The node-runner interface: how the executor gets one resolved node run.

The executor knows nothing about transport. A runner may call an in-process
tool registry (``dagnet run``), or the tool providers of a subnet over HTTP.

A runner that can run generator nodes (docs/execution.md, generator nodes and
frames) is also a :class:`FrameRunner`: it hands each frame to the executor the
moment it has it, so the nodes that run on that frame can start while the
generator is still producing the next.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .output import NodeOutput


@dataclass(slots=True)
class NodeCall:
    """One attempt at one node, with its DataRefs already resolved."""

    task_id: str
    node_id: str
    subnet: str
    action: str
    params: dict
    timeout_seconds: float
    attempt: int  # 1-based


@dataclass(slots=True)
class NodeResult:
    """What one attempt produced.

    ``output`` is ``None`` exactly when the attempt failed; ``error`` then says why.
    Runners validate what they receive (``NodeOutput``) so oversize or malformed
    output arrives here as a failure, never truncated. ``unplanned_retries`` counts
    transport retries the runner made on its own.
    """

    output: NodeOutput | None
    cost_tao: float = 0.0
    error: str | None = None
    unplanned_retries: int = 0


Emit = Callable[[NodeOutput], bool]
"""Hands one frame to the executor; ``False`` means it wants no more (stop producing)."""


class NodeRunner(Protocol):
    async def run(self, call: NodeCall) -> NodeResult: ...


@runtime_checkable
class FrameRunner(Protocol):
    async def run_frames(self, call: NodeCall, emit: Emit) -> NodeResult:
        """Run one attempt of a generator node, calling ``emit(frame)`` for each frame
        in order as it appears. The result is the attempt's outcome: its cost, its
        error, and as ``output`` a summary of the frames (never a frame itself)."""
        ...
