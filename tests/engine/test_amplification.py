"""A small plan cannot make the validator build huge params (docs/hardening.md).

Each plan is about 300 KiB, small enough to pass ``check_response``, and repeats a
ref to a 16 KB output 15,000 times: resolved, its last node's params would be
~240 MB (the interpolated form used to reach GiBs). The executor decides from the
referenced output's size that the node is over ``max_params_bytes`` and blocks it
before building anything. Each plan runs in a fresh process and reads its peak resident
memory from ``VmHWM`` (the high-water mark of the memory it execs into), not ``ru_maxrss``,
which Linux carries over from the parent at fork: from a test worker grown to 420 MiB
the child's ``ru_maxrss`` said 420 MiB however little the plan took.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.limits import DEFAULT_LIMITS

ROOT = Path(__file__).resolve().parents[2]
REPEATS = 15_000
PEAK_RSS_BOUND_KIB = 200 * 1024
"""Peak resident memory of a process that imports the validator and runs one such plan."""

RUN = """
import asyncio, json, sys
from subnets.registry import default_registry
from subnets.runner import LocalRunner
from protocol.plan import WorkflowPlan
from engine.executor import execute

plan = WorkflowPlan.model_validate_json(sys.stdin.read())
execution = asyncio.run(execute(plan, LocalRunner(default_registry()), task_id="amp",
                                budget_ceiling=None, deadline_s=60.0))
print(json.dumps({"reasons": {k: r.reason for k, r in execution.nodes.items()},
                  "peak_kib": next(int(line.split()[1]) for line in open("/proc/self/status")
                                   if line.startswith("VmHWM:"))}))
"""

PARAMS = {
    "whole_values": {"metadata": {"items": ["${big.output.text}"] * REPEATS}},
    "interpolated": {"text": "${big.output.text}" * REPEATS},
    "nested_lists": {"metadata": {"items": [["${big.output.text}"] * 100] * 100}},
}


def _plan(params: dict) -> str:
    return json.dumps(
        {
            "nodes": [
                {"id": "big", "subnet": "s", "action": "echo", "params": {"text": "x" * 16_000}},
                {"id": "amp", "subnet": "s", "action": "echo", "params": params},
            ],
            "edges": [{"from": "big", "to": "amp"}],
        }
    )


@pytest.mark.parametrize("shape", sorted(PARAMS))
def test_amplifying_params_are_blocked_before_they_are_built(shape: str) -> None:
    plan = _plan(PARAMS[shape])
    assert len(plan) < 400 * 1024
    done = subprocess.run(
        [sys.executable, "-c", RUN], input=plan, capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    print(f"\namplification {shape}: peak RSS {result['peak_kib'] // 1024} MiB")
    assert result["reasons"]["big"] is None
    assert result["reasons"]["amp"].startswith("params_too_large:")
    size, cap = map(int, result["reasons"]["amp"].removeprefix("params_too_large:").split(">"))
    assert cap == DEFAULT_LIMITS.max_params_bytes and size > 100 * 1024 * 1024
    assert result["peak_kib"] < PEAK_RSS_BOUND_KIB
