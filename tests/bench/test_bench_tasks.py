"""`dagnet bench tasks`: the per-type summary and weights, and two copies of one planner
measured from real runs."""

from __future__ import annotations

import asyncio

import pytest

from bench.tasks import COPIES_WITHIN, REFERENCE_PLANNERS, network_weights, run_copies, summarize
from tasks import load_families


def _row(task_id: str, task_type: str, **medians: float) -> dict:
    return {
        "task_id": task_id,
        "task_type": task_type,
        **{s: {"S": medians[s.replace("+", "_")]} for s in REFERENCE_PLANNERS},
    }


def test_the_summary_counts_wins_and_weighs_the_type_means() -> None:
    rows = [
        _row("a1", "agent", good=0.80, naive=0.0, naive_retries=0.75),
        _row("a2", "agent", good=0.78, naive=0.79, naive_retries=0.74),
        _row("r1", "rag", good=0.82, naive=0.70, naive_retries=0.70),
    ]
    summary = summarize(rows)
    assert summary["agent"]["good_beats"] == {"naive": 1, "naive+retries": 2}
    assert summary["agent"]["mean_S"]["good"] == pytest.approx(0.79)
    assert summary["all"]["families"] == 3
    weights = summary["rag"]["weights"]["naive+retries"]
    assert weights == network_weights(0.82, 0.70)
    assert weights["2_miners"]["good"] + weights["2_miners"]["other"] == pytest.approx(1.0)
    assert 5 * (weights["10_miners"]["good"] + weights["10_miners"]["other"]) == pytest.approx(1.0)


def test_two_copies_of_the_good_planner_get_weights_within_ten_percent() -> None:
    # The roomiest latency limits without a sandboxed step: timing noise is the
    # smallest share of S there, so a short window is enough.
    roomy = sorted(
        (f for f in load_families() if f.task_type != "code"), key=lambda f: f.package.constraints.max_latency_seconds
    )[-4:]
    copies = asyncio.run(run_copies(window=8, seed=11, families=roomy))
    assert min(copies["mean_S"]) > 0.7  # real runs that completed, not two zeros agreeing
    assert sum(copies["weights"]) == pytest.approx(1.0)
    assert copies["ratio"] <= COPIES_WITHIN and copies["within_10_percent"]
