"""`dagnet bench tasks --tiers`: the oracle, the headroom and the per-tier summary."""

from __future__ import annotations

import asyncio

from bench.tasks import network_weights
from bench.tiers import oracle_plan, run_tiers_bench, tier_targets
from planners import load_planner
from protocol.hints import TIERS
from tasks import load_families


def _one_per_type():
    seen: dict[str, object] = {}
    for family in load_families():
        seen.setdefault(family.task_type, family)
    return list(seen.values())


def test_the_oracle_puts_each_kind_on_one_allowed_subnet_and_retries_its_known_failures():
    for family in load_families():
        good = load_planner("good").plan(family.package).plan
        oracle = oracle_plan(family.package, good)
        tools = family.package.available_tools
        allowed = family.package.constraints.allowed_subnets or list(tools)
        assert [n.id for n in oracle.nodes] == [n.id for n in good.nodes]
        assert [n.params for n in oracle.nodes] == [n.params for n in good.nodes]
        subnets: dict[str, set[str]] = {}
        for node in oracle.nodes:
            subnets.setdefault(tools[node.subnet].type, set()).add(node.subnet)
            assert node.subnet in allowed
            assert oracle.error_handling[node.id].retry_count >= tools[node.subnet].fail_first
        assert all(len(names) == 1 for names in subnets.values())


def test_every_tier_and_type_is_summarised_and_the_oracle_bounds_good_on_every_tier():
    families = _one_per_type()
    result = asyncio.run(run_tiers_bench(seeds=1, drawn=0, families=families))
    types = {f.task_type for f in families}
    assert set(result["summary"]) == {f"{tier}/{name}" for tier in TIERS for name in (*types, "all")}
    for row in result["rows"]:
        assert row["oracle"]["S"] >= row["good"]["S"]
    full = result["summary"]["full/all"]
    assert all(entry["headroom"] >= 0 for entry in result["summary"].values())
    assert full["mean_S"]["good"] > full["mean_S"]["naive"]
    assert result["summary"]["goal/all"]["mean_S"]["naive"] == 0.0


def _entry(tier: str, kind: str, good: float, naive: float, retries: float, headroom: float, solved: float) -> dict:
    weights = network_weights(good, retries)["2_miners"]
    return {
        "tier": tier,
        "type": kind,
        "mean_S": {"good": good, "naive": naive, "naive+retries": retries},
        "headroom": headroom,
        "solved": solved,
        "weights": {"good": weights["good"], "other": weights["other"]},
    }


def test_each_target_names_the_tier_and_type_that_miss_it():
    summary = {
        "full/rag": _entry("full", "rag", 0.80, 0.60, 0.75, 0.01, 1.0),  # ratio 2.3: under 3
        "full/all": _entry("full", "all", 0.80, 0.60, 0.75, 0.01, 1.0),  # "all" is not a type
        "goal/code": _entry("goal", "code", 0.95, 0.10, 0.0, 0.0, 0.7),  # naive > 0, 70 % solved, no headroom
        "goal/agent": _entry("goal", "agent", 0.82, 0.0, 0.0, 0.003, 0.97),  # every target met
    }
    assert dict(tier_targets(summary)) == {
        "good's weight ≥ 3 × naive+retries' on every type and tier": ["full/rag"],
        "naive scores 0 on goal": ["goal/code"],
        "good solves ≥ 80% of goal instances of every type": ["goal/code"],
        "headroom > 0 on every type and tier": ["goal/code"],
    }


def test_the_bench_runs_hidden_seeds_only():
    """Seed 0 is every family's public example, which good fits by construction: the
    bench's medians leave it out (and every other public example's seed)."""
    from bench.tiers import hidden_seeds

    assert hidden_seeds(0, 3) == [1, 2, 3] and hidden_seeds(5, 2) == [5, 6]
    result = asyncio.run(run_tiers_bench(seed=0, seeds=1, drawn=0, families=_one_per_type()[:1]))
    assert result["instances"] == [1]
    assert all(row["good"]["runs"] == 1 for row in result["rows"])
