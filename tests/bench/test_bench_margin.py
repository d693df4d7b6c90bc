"""`dagnet bench margin`: the attack networks paid as a validator pays them (first commit,
margins clear of their error), and the consensus between validators (bench/margin.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from rich.console import Console

from bench.margin import (
    GOOD,
    GOOD_RENAMED,
    NAIVE,
    NETWORKS,
    ORACLE,
    RETRIED,
    Instance,
    _consensus,
    _window_weights,
    render_margin_bench,
    run_margin_bench,
    with_retries,
)
from planners import GoodPlanner
from planners.attackers import disguised
from protocol.canonical import plan_digest
from scoring.margin import FLOOR, Answer
from tasks import load_families

LEARNER = Path(__file__).resolve().parents[2] / "examples" / "learner-planner"


def _instance(k: int, good: float, oracle: float, naive: float = 0.4) -> Instance:
    return Instance(
        0,
        0,
        f"f{k}",
        1,
        {
            GOOD: Answer("g", good),
            GOOD_RENAMED: Answer("g", good),
            ORACLE: Answer(f"o{k}", oracle),
            NAIVE: Answer("n", naive),
        },
    )


def test_copies_of_the_reference_get_nothing_past_the_first_and_the_better_planner_takes_the_rest():
    window = [_instance(k, 0.6, 0.7 if k % 2 else 0.65) for k in range(10)]
    paid = _window_weights([ORACLE, GOOD, GOOD, GOOD_RENAMED, NAIVE], window)
    assert paid["payout"] == "margin" and paid["leaders"] == [0, 1, 1, 1, 4]
    assert paid["weights"][0] == pytest.approx(1 - FLOOR)
    assert paid["weights"][1] > paid["weights"][4] > 0 and paid["weights"][2] == paid["weights"][3] == 0.0
    assert math.fsum(paid["weights"]) == pytest.approx(1.0)
    both_good = _window_weights([GOOD, GOOD], window)
    assert both_good["weights"] == [1.0, 0.0] and both_good["payout"] == "floor_only"


def test_the_attackers_plans_are_the_same_program_or_another_one():
    family = next(f for f in load_families() if f.task_id == "dt_inventory")
    plan = GoodPlanner(timed=False).plan(family.package).plan
    assert plan_digest(disguised(plan, 1)) == plan_digest(disguised(plan, 7)) == plan_digest(plan)
    assert disguised(plan, 1).nodes[0].id not in {node.id for node in plan.nodes}
    assert plan_digest(with_retries(plan, 10)) != plan_digest(plan)


def test_consensus_reads_ties_as_ties_and_names_the_largest_differences():
    same = _consensus([[0.9, 0.05, 0.05], [0.8, 0.1, 0.1]])
    assert same["same_order"] and same["max_rank_diff"] == 0 and same["max_weight_diff"] == pytest.approx(0.1)
    swapped = _consensus([[0.9, 0.06, 0.04], [0.9, 0.04, 0.06]])
    assert not swapped["same_order"] and swapped["max_rank_diff"] == 1


def test_a_tiny_bench_has_every_network_with_weights_in_range(monkeypatch):
    monkeypatch.syspath_prepend(str(LEARNER))
    families = [f for f in load_families() if f.task_id in ("dt_inventory", "dt_grades", "rag_comets")]
    result = run_margin_bench(
        validators=2, first_secret=5, tempos=2, drawn=0, window=4, learner="learner_planner:Learner", families=families
    )
    assert result["learner"] and result["secrets"] == [5, 6] and RETRIED in result["gains"]
    assert [n["name"] for n in result["networks"]] == [net.name for net in NETWORKS]
    for net in result["networks"]:
        assert set(net["per_validator"]) == {"5", "6"}
        for paid in net["per_validator"].values():
            assert len(paid["weights"]) == net["miners"] and all(0 <= w <= 1 for w in paid["weights"])
            assert math.fsum(paid["weights"]) == pytest.approx(1.0)
        assert all(0 <= v <= 1 + 1e-9 for v in net["yuma"]["vtrust"])
    good = result["gains"][GOOD_RENAMED]["all"]
    assert good["margin"] == 0.0 and good["sd"] == 0.0  # a renamed copy of the reference runs as it does
    console = Console(width=200, record=True, color_system=None)
    render_margin_bench(result, console)
    text = console.export_text()
    assert "64 identical learners" in text and "target: vtrust ≥ 0.95 for every validator in every network:" in text
