"""`dagnet bench executor` runs end to end and reports what it claims (small sizes)."""

import io

from rich.console import Console

from bench.executor import _tier_barrier_s, render_executor_bench, run_executor_bench
from protocol.graph import Graph


def test_bench_reports_ratios_for_each_size_and_a_throughput_beside_its_baseline():
    result = run_executor_bench(sizes=(10, 30), throughput_nodes=300, repeats=1, frames=40)
    assert [case["nodes"] for case in result["makespan"]] == [10, 30]
    for case in result["makespan"]:
        # no executor can beat the critical path; the barrier schedule never beats it either
        assert case["makespan_over_cp"] > 0.99  # timers may fire within the clock resolution
        assert case["tier_barrier_over_cp"] >= 1.0
    tp = result["throughput"]
    assert tp["nodes"] == 300 and tp["nodes_per_s"] > 0 and tp["graphlib_task_per_node_nodes_per_s"] > 0
    assert tp["over_graphlib_baseline"] == tp["nodes_per_s"] / tp["graphlib_task_per_node_nodes_per_s"]
    assert tp["dagnet_run_nodes_per_s"] > 0
    assert (
        tp["dagnet_run_over_graphlib_baseline"]
        == tp["dagnet_run_nodes_per_s"] / tp["graphlib_task_per_node_nodes_per_s"]
    )
    targets = result["targets"]
    assert tp["meets_over_graphlib_target"] == (tp["over_graphlib_baseline"] >= targets["over_graphlib_baseline"])
    assert tp["meets_dagnet_run_target"] == (
        tp["dagnet_run_over_graphlib_baseline"] >= targets["dagnet_run_over_graphlib_baseline"]
    )
    printed = io.StringIO()
    render_executor_bench(result, Console(file=printed, width=400))
    ratios = next(line for line in printed.getvalue().splitlines() if line.startswith("÷ bare loop"))
    assert f"executor {tp['over_graphlib_baseline']:.2f} (target ≥ 0.9)" in ratios
    assert f"dagnet run path {tp['dagnet_run_over_graphlib_baseline']:.2f} (target ≥ 0.6)" in ratios
    frames = result["frames"]
    assert (frames["frames"], frames["instances"]) == (40, 80)
    assert frames["makespan_over_cp"] > 0.99 and frames["generator_barrier_over_cp"] >= 1.0


def test_tier_barrier_schedule_sums_the_slowest_node_of_each_kahn_level():
    # a -> c, b -> c; a is slow, b fast, c medium: levels {a, b}, {c}
    graph = Graph(["a", "b", "c"], [(0, 2), (1, 2)])
    assert _tier_barrier_s(graph, [0.5, 0.1, 0.2]) == 0.5 + 0.2
    # a chain's barrier schedule equals its critical path
    chain = Graph(["x", "y"], [(0, 1)])
    assert _tier_barrier_s(chain, [0.3, 0.4]) == chain.critical_path([0.3, 0.4])
