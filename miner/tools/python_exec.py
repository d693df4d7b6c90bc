"""``python_exec``: run a Python program in the sandbox and return its stdout.

The code never runs in this process: :func:`sandbox.run_python_async` starts a
separate, isolated interpreter with CPU, memory, process and file-size limits
and no network. The wall limit is also capped by the node's timeout, so the
sandboxed process does not outlive the attempt that started it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from protocol.limits import OUTPUT_CODE_MAX_BYTES, OUTPUT_TEXT_MAX_BYTES
from sandbox import SandboxLimits, SandboxResult, SandboxUnavailable, run_python_async

from ._common import make_output, parse_params
from .base import Tool, ToolContext, ToolError, ToolResult, ToolSpec

STDERR_TAIL_CHARS = 1000


class PythonExecParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str = Field(min_length=1, max_length=OUTPUT_CODE_MAX_BYTES)
    stdin: str = Field(default="", max_length=1024 * 1024)
    args: list[str] = Field(default_factory=list, max_length=64)


def make_python_exec(limits: SandboxLimits) -> Tool:
    """The ``python_exec`` tool running under ``limits`` (wall time capped per call)."""

    async def python_exec(params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        p = parse_params(PythonExecParams, params)
        if len(p.code.encode("utf-8", "surrogatepass")) > OUTPUT_CODE_MAX_BYTES:
            raise ToolError(f"bad params: code: longer than {OUTPUT_CODE_MAX_BYTES} bytes")
        run_limits = dataclasses.replace(
            limits,
            wall_seconds=min(limits.wall_seconds, ctx.timeout_seconds),
            # more than a node may output, so an oversize stdout is seen whole-or-more, never cut to fit
            max_output_bytes=max(limits.max_output_bytes, OUTPUT_TEXT_MAX_BYTES + 1),
        )
        try:
            result = await run_python_async(
                files={"main.py": p.code}, args=["main.py", *p.args], stdin=p.stdin, limits=run_limits
            )
        except SandboxUnavailable as exc:
            raise ToolError(f"python_exec: no sandbox on this machine: {exc}") from None
        _check(result)
        metadata = {"returncode": result.returncode, "wall_s": round(result.wall_s, 4)}
        return ToolResult(make_output(result.stdout, code=p.code, metadata=metadata))

    return python_exec


def _check(result: SandboxResult) -> None:
    """Raise ``ToolError`` unless the program finished cleanly with output that fits."""
    tail = result.stderr[-STDERR_TAIL_CHARS:].strip()
    if result.timed_out:
        raise ToolError(f"python_exec: timed out after {result.wall_s:.1f}s")
    if result.returncode != 0:
        raise ToolError(f"python_exec: exit status {result.returncode}: {tail or '(no stderr)'}")
    if len(result.stdout.encode("utf-8", "surrogatepass")) > OUTPUT_TEXT_MAX_BYTES:
        raise ToolError(f"python_exec: stdout exceeds {OUTPUT_TEXT_MAX_BYTES} bytes")


def python_exec_spec(limits: SandboxLimits | None = None) -> ToolSpec:
    return ToolSpec(
        name="python_exec",
        fn=make_python_exec(limits or SandboxLimits()),
        description="Run Python code (main.py, with stdin and args) in an isolated sandbox without "
        "network; text is its stdout, artifacts.code the code.",
        latency_s=0.2,
    )
