"""Tools refuse an output that cannot fit before they build it, and keep CPU work off the loop.

Each hostile request below used to make a tool allocate hundreds of MiB to GiB
from a request of a few hundred KiB. Peak allocation is measured with
``tracemalloc`` (counted bytes, not time), and must stay within a few times the
request's own size.
"""

from __future__ import annotations

import asyncio
import json
import os
import tracemalloc
from typing import Any

import pytest

from protocol.output import NodeOutput
from subnets.base import ToolContext, ToolError, ToolResult, run_in_process
from subnets.text import MAX_TEXT_CHARS, text_transform
from subnets.transform import csv_to_json, json_to_csv, json_transform

CTX = ToolContext(task_id="t", node_id="n", attempt=1, timeout_seconds=5.0)
MIB = 1024 * 1024
PEAK_BOUND = 4 * MIB
"""What one hostile call may allocate on top of its (already parsed) params."""

HOSTILE: list[tuple[Any, dict[str, Any], str]] = [
    # 260 KiB of text, every character replaced by 4 KiB: ~1 GiB of output
    (text_transform, {"op": "replace", "text": "a" * MAX_TEXT_CHARS, "old": "a", "new": "b" * 4096}, "replace"),
    # 127 KiB of fields, each filled with a 16 KiB value: ~500 MiB
    (text_transform, {"op": "template", "text": "{v}" * 43_000, "values": {"v": "x" * 16_000}}, "template"),
    (text_transform, {"op": "template", "text": "{v}" * 43_000, "values": {"v": ["x" * 60] * 200}}, "template"),
    # every position of 16 KiB matched, each replaced by 256 characters: 4 MiB
    (text_transform, {"op": "regex_replace", "text": "a" * 16_000, "pattern": "", "repl": "r" * 256}, "regex_replace"),
    (text_transform, {"op": "join", "items": [""] * 100_000, "sep": "s" * 256}, "join"),
    (text_transform, {"op": "split_lines", "text": "\n" * 100_000, "keep_empty": True}, "the JSON result"),
    # records that repeat a long header name (csv) or a long row of delimiters (json_to_csv)
    (csv_to_json, {"csv": "h" * 4096 + "\n" + "x\n" * 60_000}, "csv_to_json"),
    (json_to_csv, {"data": [{}] * 50_000, "columns": [f"c{i}" for i in range(2_000)]}, "json_to_csv"),
    # renaming the key of 10k records to a 4 KiB name: 40 MiB of JSON text
    (
        json_transform,
        {"data": [{"a": 0}] * 10_000, "ops": [{"op": "rename", "mapping": {"a": "k" * 4096}}]},
        "the JSON result",
    ),
]


@pytest.mark.parametrize("tool, params, what", HOSTILE, ids=[h[2] + str(i) for i, h in enumerate(HOSTILE)])
def test_amplifying_requests_are_refused_before_the_output_is_built(tool, params, what) -> None:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        with pytest.raises(ToolError, match=f"output too large: {what}"):
            tool.__wrapped__(params, CTX)  # the tool's work in this process, where tracemalloc sees it
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert peak < PEAK_BOUND, f"{what}: peak allocation {peak / MIB:.1f} MiB"


async def test_outputs_up_to_the_limit_are_still_built() -> None:
    output = (await text_transform({"op": "template", "text": "{v}-{v}", "values": {"v": "x" * 8000}}, CTX)).output
    assert output.text == "x" * 8000 + "-" + "x" * 8000
    output = (await text_transform({"op": "regex_replace", "text": "abc", "pattern": "", "repl": "-"}, CTX)).output
    assert output.text == "-a-b-c-"
    output = (await json_transform({"data": [{"a": 1}], "ops": [{"op": "rename", "mapping": {"a": "b"}}]}, CTX)).output
    assert json.loads(output.text) == [{"b": 1}]


def _where(params: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return ToolResult(NodeOutput(text=str(os.getpid())))


def _spin(params: dict[str, Any], ctx: ToolContext) -> ToolResult:
    while True:
        pass


async def test_cpu_work_runs_in_a_tool_process() -> None:
    """The tool's work happens in another process: neither the loop's thread nor its interpreter lock."""
    assert int((await run_in_process(_where)({}, CTX)).output.text) != os.getpid()


async def test_a_call_past_its_cpu_limit_fails_and_the_process_serves_on() -> None:
    with pytest.raises(ToolError, match=r"cpu limit exceeded \(0.2s\)"):
        await run_in_process(_spin, cpu_s=0.2)({}, CTX)
    output = (await json_transform({"data": [3, 1, 2], "ops": [{"op": "sort"}]}, CTX)).output
    assert json.loads(output.text) == [1, 2, 3]


async def test_a_cancelled_caller_returns_at_once() -> None:
    task = asyncio.create_task(text_transform({"op": "upper", "text": "x"}, CTX))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
