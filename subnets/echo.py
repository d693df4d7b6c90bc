"""``echo``: returns its params as output, after an optional delay, at a chosen cost.

The tool for dry runs, tests and benchmarks: a plan made only of ``echo`` nodes
exercises the executor's timing, budgets and retries with no real work. Its
params are a ``TypedDict`` validated by pydantic straight into a plain dict, no
model instance in between: echo is the benchmarks' tool, so its own cost per
call is kept to the checks themselves.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError
from typing_extensions import TypedDict

from protocol.errors import format_validation_error

from ._common import make_output
from .base import ToolContext, ToolError, ToolResult, ToolSpec


class EchoParams(TypedDict, total=False):
    """Every param is optional: ``text``, ``code`` ("") and ``metadata`` ({}) are echoed;
    ``delay_s`` (0) is waited first; ``cost`` (0) is charged per attempt; the first
    ``fail_first`` (0) attempts fail."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    text: str
    code: str
    metadata: dict[str, Any]
    delay_s: Annotated[float, Field(ge=0, le=3600, allow_inf_nan=False)]
    cost: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    fail_first: Annotated[int, Field(ge=0, le=1000)]


_validate = TypeAdapter(EchoParams).validate_python


async def echo(params: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """Wait ``delay_s``, fail attempts ``1..fail_first``, else return text/code/metadata.

    Every attempt, failed or not, charges ``cost``. A zero delay never suspends,
    so a zero-delay echo completes in the caller's first step.
    """
    try:
        p = _validate(params)
    except ValidationError as exc:
        raise ToolError(f"bad params: {format_validation_error(exc)}") from None
    delay = p.get("delay_s", 0.0)
    if delay > 0:
        await asyncio.sleep(delay)
    cost = float(p.get("cost", 0.0))
    if ctx.attempt <= p.get("fail_first", 0):
        raise ToolError(f"echo: planned failure of attempt {ctx.attempt} (fail_first={p['fail_first']})", cost_tao=cost)
    return ToolResult(make_output(p.get("text", ""), code=p.get("code", ""), metadata=p.get("metadata")), cost_tao=cost)


ECHO = ToolSpec(
    name="echo",
    fn=echo,
    description="Return text/code/metadata unchanged after delay_s seconds, charging cost; "
    "the first fail_first attempts fail. For dry runs and tests.",
)
