"""``python_exec``: run a Python program in the sandbox and return its stdout.

The code never runs in this process: :func:`sandbox.run_python` starts a separate,
isolated interpreter with CPU, memory, process and file-size limits and no network.

The tool is a blocking one run in a worker thread (:func:`run_in_thread`), so on a
validator's simulated clock (owned execution, ``engine/simclock.py``) it runs inline
and takes no simulated time of its own: the subnet's profile gives the node its latency.
The program's CPU is capped by the node's timeout (at least one second: RLIMIT_CPU counts
whole seconds), and its wall time by a multiple of that (and by what the attempt has left
of its plan's allowance, :data:`~protocol.runner.WORK_LEFT_S`, on a validator), so a loaded machine reaches the
same outcome as a quiet one unless the program sleeps. Its output carries nothing the
machine measured (no wall time): a plan's output must not depend on the validator's load.

Its input is bounded (:data:`INPUT_MAX_BYTES` for code, stdin and args together) and it
reads no held data (``subnets/holdings.py``): a call is priced by its subnet as a fixed
CPU allowance (the node's timeout caps its CPU), so nothing large is shipped into it.
"""

from __future__ import annotations

import dataclasses
import signal
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from protocol.limits import OUTPUT_TEXT_MAX_BYTES
from protocol.runner import WORK_LEFT_S
from sandbox import SandboxLimits, SandboxResult, SandboxUnavailable, run_python

from ._common import make_output, parse_params
from .base import Tool, ToolContext, ToolError, ToolResult, ToolSpec, run_in_thread

STDERR_TAIL_CHARS = 1000
WALL_PER_CPU = 3.0
"""The wall-clock cap is this many times the CPU cap: slack for a loaded machine."""


INPUT_MAX_BYTES = 8 * 1024
"""The most a call may ship into the sandbox: its code, stdin and args together (UTF-8).
An exec subnet computes; it is not a place to send data (docs/hardening.md)."""


class PythonExecParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str = Field(min_length=1, max_length=INPUT_MAX_BYTES)
    stdin: str = Field(default="", max_length=INPUT_MAX_BYTES)
    args: list[str] = Field(default_factory=list, max_length=64)


def make_python_exec(limits: SandboxLimits) -> Tool:
    """The ``python_exec`` tool running under ``limits`` (wall time capped per call)."""

    def python_exec(params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        p = parse_params(PythonExecParams, params)
        shipped = sum(len(part.encode("utf-8", "surrogatepass")) for part in (p.code, p.stdin, *p.args))
        if shipped > INPUT_MAX_BYTES:
            raise ToolError(f"bad params: code, stdin and args: {shipped} bytes, more than {INPUT_MAX_BYTES}")
        cpu = min(limits.cpu_seconds, max(1.0, ctx.timeout_seconds))
        run_limits = dataclasses.replace(
            limits,
            cpu_seconds=cpu,
            wall_seconds=min(limits.wall_seconds, WALL_PER_CPU * cpu, WORK_LEFT_S.get()),
            # more than a node may output, so an oversize stdout is seen whole-or-more, never cut to fit
            max_output_bytes=max(limits.max_output_bytes, OUTPUT_TEXT_MAX_BYTES + 1),
        )
        try:
            result = run_python(files={"main.py": p.code}, args=["main.py", *p.args], stdin=p.stdin, limits=run_limits)
        except SandboxUnavailable as exc:
            raise ToolError(f"python_exec: no sandbox on this machine: {exc}") from None
        _check(result, run_limits)
        return ToolResult(make_output(result.stdout, code=p.code, metadata={"returncode": result.returncode}))

    return run_in_thread(python_exec)


def _check(result: SandboxResult, limits: SandboxLimits) -> None:
    """Raise ``ToolError`` unless the program finished cleanly with output that fits."""
    tail = result.stderr[-STDERR_TAIL_CHARS:].strip()
    if result.timed_out:
        raise ToolError(f"python_exec: timed out (wall limit {limits.wall_seconds:g}s)")
    if result.returncode == 128 + signal.SIGXCPU:
        raise ToolError(f"python_exec: CPU limit exceeded ({limits.cpu_seconds:g}s)")
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
