"""``echo``: returns its params as output, after an optional delay, at a chosen cost.

The tool for dry runs, tests and benchmarks: a plan made only of ``echo`` nodes
exercises the executor's timing, budgets and retries with no real work.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ._common import make_output, parse_params
from .base import ToolContext, ToolError, ToolResult, ToolSpec


class EchoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = ""
    code: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
    delay_s: float = Field(default=0.0, ge=0, le=3600, allow_inf_nan=False)
    cost: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    fail_first: int = Field(default=0, ge=0, le=1000)


async def echo(params: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """Wait ``delay_s``, fail attempts ``1..fail_first``, else return text/code/metadata.

    Every attempt, failed or not, charges ``cost``. A zero delay never suspends,
    so a zero-delay echo completes in the caller's first step.
    """
    p = parse_params(EchoParams, params)
    if p.delay_s > 0:
        await asyncio.sleep(p.delay_s)
    if ctx.attempt <= p.fail_first:
        raise ToolError(f"echo: planned failure of attempt {ctx.attempt} (fail_first={p.fail_first})", cost_tao=p.cost)
    return ToolResult(make_output(p.text, code=p.code, metadata=p.metadata), cost_tao=p.cost)


ECHO = ToolSpec(
    name="echo",
    fn=echo,
    description="Return text/code/metadata unchanged after delay_s seconds, charging cost; "
    "the first fail_first attempts fail. For dry runs and tests.",
)
