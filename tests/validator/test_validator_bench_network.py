"""`dagnet bench network` end to end at toy size: it runs, stops by itself, and reports."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from bench.network import render_network_bench, run_network_bench

pytestmark = pytest.mark.e2e


def test_network_bench_measures_both_modes_and_a_step() -> None:
    result = run_network_bench(requests=300, duration_s=2.0, concurrency=8, miners=4, miner_processes=1, repeats=1)
    throughput, step = result["throughput"], result["step"]
    for mode in ("signed", "unsigned"):
        assert throughput[mode]["ok"] > 0 and throughput[mode]["failed"] == 0
        assert throughput[mode]["p50_ms"] <= throughput[mode]["p99_ms"]
    assert throughput["signed_over_unsigned"] > 0
    flooded = throughput["flooded"]  # the same signed load beside an unauthenticated flood
    assert flooded["ok"] > 0 and flooded["failed"] == 0 and flooded["p50_ms"] <= flooded["p99_ms"]
    assert step["miners"] == 4 and len(step["repeats"]) == 1
    assert (step["task_id"], step["seeds"]) == ("rag_towns", [1, 2])  # a v2 family, a fresh instance each step
    assert step["median"]["record_s"] > 0
    assert step["median"]["invalid"] == 0  # every miner answered with a valid plan
    assert 0 < step["median"]["query_s"] < step["median"]["wall_s"]

    console = Console(file=io.StringIO(), width=160)
    render_network_bench(result, console)
    text = console.file.getvalue()
    assert "signed ÷ unsigned" in text and "validation step" in text and "under flood" in text
