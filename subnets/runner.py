"""``LocalRunner``: a :class:`protocol.runner.NodeRunner` over an in-process tool registry.

Every node runs on the registry by its ``action``, whatever its ``subnet``. Given
a subnet table (a task's ``available_tools``), the runner also plays the part of
those subnets' providers: it awaits each subnet's ``avg_latency``, charges its
``avg_cost`` on top of the tool's own cost, and fails the first ``fail_first``
attempts of every node on a flaky subnet. So a plan's choice of subnets costs and
takes time in a local run the way it would on the network. Given a
:class:`~subnets.world.World` (a tempo's hidden truth) and the instance's seed, it plays
the subnets as that world says instead; the advertised world is the profile itself.

Generator actions (``split``) run through :meth:`LocalRunner.run_frames`, which
hands each frame to the executor the moment the tool yields it.

The zero-latency path makes no extra awaits: the executor's throughput
benchmark pushes 100k+ nodes/s through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

from pydantic import ValidationError

from protocol.errors import format_validation_error
from protocol.output import NodeOutput
from protocol.runner import Emit, NodeCall, NodeResult
from protocol.synapse import ToolInfo

from .base import ToolContext, ToolError, ToolRegistry
from .frames import frames_summary
from .world import ADVERTISED, World, draw_key

ERROR_MAX_CHARS = 2000
"""Longer error messages are cut (with a marker) so a report stays readable."""


class LocalRunner:
    """Run nodes on ``registry``; price and delay them by ``subnets`` when given.

    Never raises for a failed node: a :class:`ToolError` becomes an error result
    carrying its cost, any other exception ``"internal tool error: <Type>: msg"``.
    Cancellation (the executor's timeout) propagates as it should.
    """

    __slots__ = ("_registry", "_subnets", "_by_task", "_world", "_seed")

    def __init__(
        self,
        registry: ToolRegistry,
        subnets: Mapping[str, ToolInfo] | None = None,
        by_task: Mapping[str, Mapping[str, ToolInfo]] | None = None,
        *,
        world: World = ADVERTISED,
        seed: int = 0,
    ) -> None:
        """``by_task`` gives the subnet table of particular task ids (a local
        network's provider plays each task's published profile); other task ids
        use ``subnets``. ``world`` and ``seed`` (the instance's) decide each call's
        latency, price and failure (:meth:`subnets.world.World.call`)."""
        self._registry = registry
        self._subnets = dict(subnets) if subnets is not None else None
        self._by_task = {task: dict(table) for task, table in (by_task or {}).items()}
        self._world = world
        self._seed = seed

    def run(self, call: NodeCall) -> Coroutine[Any, Any, NodeResult]:
        """The attempt's coroutine (``await runner.run(call)`` as for any runner), handed
        back as it is rather than awaited inside one more: a zero-delay node's whole
        attempt is this one coroutine and the tool's."""
        subnets = self._by_task.get(call.task_id, self._subnets)
        if subnets is None:
            return self._run_tool(call, 0.0)
        return self._as_provider(call, subnets, self._run_tool)

    async def run_frames(self, call: NodeCall, emit: Emit) -> NodeResult:
        """Run a generator action, emitting each frame as the tool yields it."""

        async def stream(call: NodeCall, surcharge: float) -> NodeResult:
            return await self._stream_tool(call, surcharge, emit)

        subnets = self._by_task.get(call.task_id, self._subnets)
        if subnets is None:
            return await stream(call, 0.0)
        return await self._as_provider(call, subnets, stream)

    async def _as_provider(
        self, call: NodeCall, subnets: Mapping[str, ToolInfo], work: Callable[[NodeCall, float], Awaitable[NodeResult]]
    ) -> NodeResult:
        """Play the subnet's provider around ``work`` as the world says: its delay, its
        failures, its price. An outage is read at the call's start on the run's clock
        (owned execution's simulated clock starts at 0)."""
        info = subnets.get(call.subnet)
        if info is None:
            known = ", ".join(sorted(subnets)) or "none"
            return NodeResult(None, error=f"subnet {call.subnet!r} is not available (known: {known})")
        if self._world.is_advertised:
            outcome = self._world.call(call.subnet, info, (call.task_id, self._seed), call.node_id, call.attempt, 0.0)
        else:
            now = asyncio.get_running_loop().time()
            key = draw_key(call.subnet, call.action, call.params)
            outcome = self._world.call(call.subnet, info, (call.task_id, self._seed), key, call.attempt, now)
        if outcome.latency > 0:
            await asyncio.sleep(outcome.latency)
        if outcome.error is not None:
            return NodeResult(None, cost_tao=outcome.cost, error=outcome.error)
        return await work(call, outcome.cost)

    async def _run_tool(self, call: NodeCall, surcharge: float) -> NodeResult:
        try:
            result = await self._registry.call(call.action, call.params, ToolContext.of(call))
            output, cost = _checked(result.output, result.cost_tao)
        except Exception as exc:  # a tool bug must fail the node, never the executor
            return _failure(exc, surcharge)
        if _as_built(result, output, cost, surcharge):
            return result
        return NodeResult(output, cost_tao=cost + surcharge)

    async def _stream_tool(self, call: NodeCall, surcharge: float, emit: Emit) -> NodeResult:
        count, spent = 0, surcharge
        try:
            ctx = ToolContext.of(call)
            async with contextlib.aclosing(self._registry.frames(call.action, call.params, ctx)) as frames:
                async for frame in frames:
                    output, cost = _checked(frame.output, frame.cost_tao)
                    spent += cost
                    count += 1
                    if not emit(output):
                        break
        except Exception as exc:  # as in _run_tool
            return _failure(exc, spent)
        return NodeResult(frames_summary(count), cost_tao=spent)


def _failure(exc: Exception, spent: float) -> NodeResult:
    """A failed attempt: a ToolError's message and cost, or any other exception as a tool bug."""
    if isinstance(exc, ToolError):
        return NodeResult(None, cost_tao=_cost(exc.cost_tao) + spent, error=_clip(str(exc)))
    return NodeResult(None, cost_tao=spent, error=_clip(f"internal tool error: {type(exc).__name__}: {exc}"))


def _checked(output: object, cost: object) -> tuple[NodeOutput, float]:
    """The tool's output as a validated ``NodeOutput`` and its cost, or ``ToolError``."""
    if type(output) is not NodeOutput:
        try:
            output = NodeOutput.model_validate(output)
        except ValidationError as exc:
            raise ToolError(f"output rejected: {format_validation_error(exc)}") from None
    value = cost if type(cost) is float else float(cost) if isinstance(cost, (int, float)) else math.nan
    if not 0 <= value < math.inf:
        raise ToolError(f"tool reported an invalid cost: {cost!r}")
    return output, value


def _as_built(result: NodeResult, output: NodeOutput, cost: float, surcharge: float) -> bool:
    """Whether the tool's ``result`` already is the attempt's outcome this runner would
    build from it (the common case: no surcharge, a float cost, nothing else set)."""
    return (
        not surcharge
        and result.output is output
        and result.cost_tao is cost
        and type(result) is NodeResult
        and result.error is None
        and result.unplanned_retries == 0
        and result.frames is None
    )


def _cost(value: float) -> float:
    """A ToolError's cost, with nonsense (negative, NaN, infinite) read as zero."""
    return value if isinstance(value, (int, float)) and 0 <= value < math.inf else 0.0


def _clip(message: str) -> str:
    if len(message) <= ERROR_MAX_CHARS:
        return message
    return message[: ERROR_MAX_CHARS - 15] + " …[truncated]"
