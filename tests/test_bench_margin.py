"""`dagnet bench margin`: the networks paid for their margin over the reference, the
calibrated better planners and the consensus between validators (bench/margin.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from rich.console import Console

from bench.margin import GOOD, NAIVE, ORACLE, Instance, _consensus, _oracle_pairs, _window_weights, \
    render_margin_bench, run_margin_bench
from scoring.margin import FLOOR
from tasks import load_families

LEARNER = Path(__file__).resolve().parents[1] / "examples" / "learner-planner"


def _instance(tempo: int, task: str, good: float, oracle: float, naive: float = 0.4) -> Instance:
    return Instance(0, tempo, task, 1, {GOOD: good, ORACLE: oracle, NAIVE: naive},
                    {GOOD: "g-" + task, ORACLE: "o-" + task, NAIVE: "n-" + task})


def test_the_mixed_planner_takes_the_hash_prefix_whose_gain_is_closest_to_the_target():
    instances = [_instance(t, f"f{k}", 0.5, 0.6) for t in range(5) for k in range(4)]  # 20 pairs, each +0.1
    for gain in (0.01, 0.03, 0.10):
        pairs = _oracle_pairs(instances, gain)
        lifted = sum(0.1 for i in instances if i.key in pairs) / sum(i.scores[GOOD] for i in instances)
        assert abs(lifted - gain) <= 0.1 / 2 / 10 + 1e-12  # within half a pair's lift of the target
    assert _oracle_pairs(instances, 0.0) == frozenset()


def test_copies_of_the_reference_share_the_floor_and_the_better_planner_takes_the_rest():
    window = [_instance(0, f"f{k}", 0.6, 0.7 if k % 2 else 0.55) for k in range(10)]
    miners = {GOOD: lambda i: _answer(i, GOOD), ORACLE: lambda i: _answer(i, ORACLE), NAIVE: lambda i: _answer(i, NAIVE)}
    paid = _window_weights([ORACLE, GOOD, GOOD, GOOD, NAIVE], window, miners)
    assert paid["payout"] == "margin"
    assert paid["weights"][0] == pytest.approx(1 - FLOOR)
    assert paid["weights"][1] == paid["weights"][2] == paid["weights"][3] > paid["weights"][4]
    assert math.fsum(paid["weights"]) == pytest.approx(1.0)
    both_good = _window_weights([GOOD, GOOD], window, miners)
    assert both_good["weights"] == [0.5, 0.5] and both_good["payout"] == "floor_only"


def _answer(instance: Instance, strategy: str):
    from scoring.margin import Answer

    return Answer(instance.digests[strategy], instance.scores[strategy])


def test_consensus_reads_ties_as_ties_and_names_the_largest_differences():
    same = _consensus([[0.9, 0.05, 0.05], [0.8, 0.1, 0.1]])
    assert same["same_order"] and same["max_rank_diff"] == 0 and same["max_weight_diff"] == pytest.approx(0.1)
    swapped = _consensus([[0.9, 0.06, 0.04], [0.9, 0.04, 0.06]])
    assert not swapped["same_order"] and swapped["max_rank_diff"] == 1


def test_a_tiny_bench_has_every_network_with_shares_in_range(monkeypatch):
    monkeypatch.syspath_prepend(str(LEARNER))
    families = list(load_families())[:3]
    result = run_margin_bench(validators=2, tempos=2, drawn=0, window=4, learner="learner_planner:Learner",
                              families=families)
    assert result["learner"] and set(result["gains"]) == {NAIVE, "learner", "oracle 3 %", "oracle 1 %"}
    names = [n["name"] for n in result["networks"]]
    for base in ("64 miners", "64 miners, learner", "8 miners", "8 miners, learner", "2 miners, both good"):
        assert base in names and f"{base} + naive+retries" in names
    for net in result["networks"]:
        assert set(net["shares"]) == {"0", "1"}
        for paid in net["per_validator"].values():
            assert len(paid["weights"]) == net["miners"] and all(0 <= w <= 1 for w in paid["weights"])
            assert math.fsum(paid["weights"]) == pytest.approx(1.0)
        assert all(0 <= v <= 1 + 1e-9 for v in net["yuma"]["vtrust"])
    two = next(n for n in result["networks"] if n["name"] == "2 miners, both good")
    assert all(s["copy"] == pytest.approx(0.5) for s in two["shares"].values())
    console = Console(width=200, record=True, color_system=None)
    render_margin_bench(result, console)
    text = console.export_text()
    assert "64 miners + naive+retries" in text and "target: 2 miners both good: 0.5 / 0.5: ok" in text
