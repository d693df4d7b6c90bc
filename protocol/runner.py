"""The node-runner interface: how the executor gets one resolved node run.

The executor knows nothing about transport. A runner may call an in-process
tool registry (``dagnet run``), or the tool providers of a subnet over HTTP.

A runner that can run generator nodes (docs/execution.md, generator nodes and
frames) is also a :class:`FrameRunner`: it hands each frame to the executor the
moment it has it, so the nodes that run on that frame can start while the
generator is still producing the next.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Annotated, Any, Protocol, runtime_checkable

from pydantic import Field

from .output import NodeOutput
from .plan import NODE_ID_PATTERN

ERROR_MAX_CHARS = 4096
"""The longest error message a node's outcome carries over the wire."""


@dataclass(slots=True)
class NodeCall:
    """One attempt at one node, with its DataRefs already resolved.

    The one definition of a node call: the executor hands it to a runner, a tool
    provider receives it as the body of ``POST /NodeSynapse`` (its wire model,
    :class:`protocol.synapse.NodeSynapse`, is derived from these fields), and a
    tool sees it through :class:`subnets.base.ToolContext`. The constraints
    bind where a call is validated, on the wire; building one in-process checks
    nothing, so the executor's hot path stays a plain dataclass.
    """

    task_id: Annotated[str, Field(min_length=1, max_length=128)]
    node_id: Annotated[str, Field(pattern=NODE_ID_PATTERN)]
    subnet: Annotated[str, Field(min_length=1, max_length=64)]
    action: Annotated[str, Field(min_length=1, max_length=128)]
    params: dict[str, Any] = field(default_factory=dict)
    timeout_seconds: Annotated[float, Field(gt=0, le=3600)] = 10.0
    attempt: Annotated[int, Field(ge=1)] = 1  # 1-based


@dataclass(slots=True)
class NodeResult:
    """What one attempt produced: the one definition of a node's outcome.

    ``output`` is ``None`` exactly when the attempt failed; ``error`` then says why.
    Runners validate what they receive (``NodeOutput``) so oversize or malformed
    output arrives here as a failure, never truncated. ``unplanned_retries`` counts
    transport retries the runner made on its own (never on the wire). ``frames``
    holds every frame of a generator call answered in one piece (a provider's
    response), in order; a runner that streams frames emits them instead and leaves
    it ``None``. A provider's answer (:class:`protocol.synapse.NodeResponse`) is
    derived from these fields, and a tool returns one (``ToolResult``).
    """

    output: NodeOutput | None = None
    cost_tao: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0
    error: Annotated[str | None, Field(max_length=ERROR_MAX_CHARS)] = None
    unplanned_retries: int = 0
    frames: list[NodeOutput] | None = None


WORK_LEFT_S: ContextVar[float] = ContextVar("work_left_s", default=float("inf"))
"""The real seconds of work the attempt being run may still do (the rest of its plan's
allowance in a validator's owned execution, ``engine/owned.py``; unbounded elsewhere): a
tool that can stop its own work sooner caps it to this (a process tool's CPU, a sandboxed
program's wall time)."""


Emit = Callable[[NodeOutput], bool]
"""Hands one frame to the executor; ``False`` means it wants no more (stop producing)."""


class NodeRunner(Protocol):
    def run(self, call: NodeCall) -> Awaitable[NodeResult]: ...  # an async def, or any awaitable


@runtime_checkable
class FrameRunner(Protocol):
    def run_frames(self, call: NodeCall, emit: Emit) -> Awaitable[NodeResult]:
        """Run one attempt of a generator node, calling ``emit(frame)`` for each frame
        in order as it appears. The result is the attempt's outcome: its cost, its
        error, and as ``output`` a summary of the frames (never a frame itself)."""
        ...
