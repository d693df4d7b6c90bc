"""`dagnet bench margin`: the attack networks paid as a validator pays them (first commit,
margins clear of their error) against the validator's reference (``bench.world``'s
``reference``: good on the forecast from the published worlds), the targets (n/a, never
ok, where the learner does not beat the reference), and the consensus between validators
(bench/margin.py)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from bench.margin import (
    GOOD,
    LEARNER,
    NAIVE,
    NETWORKS,
    ORACLE,
    PUBLIC,
    REF_RENAMED,
    REFERENCE,
    RETRIED,
    Instance,
    _consensus,
    _gain,
    _network,
    _window_weights,
    margin_targets,
    render_margin_bench,
    run_margin_bench,
    targets_line,
)
from bench.world import run_world_bench, static_plans
from planners.attackers import disguised
from protocol.canonical import plan_digest
from protocol.plan import WorkflowPlan
from scoring.margin import FLOOR, Answer
from tasks import load_families

LEARNER_PATH = Path(__file__).resolve().parents[2] / "examples" / "learner-planner"


def _instance(k: int, ref: float, oracle: float, naive: float = 0.4, tempo: int | None = None) -> Instance:
    """Instance ``k``, in a world of its own unless ``tempo`` says whose."""
    return Instance(
        0,
        k if tempo is None else tempo,
        f"f{k}",
        1,
        {
            REFERENCE: Answer("r", ref),
            REF_RENAMED: Answer("r", ref),
            ORACLE: Answer(f"o{k}", oracle),
            NAIVE: Answer("n", naive),
        },
    )


def test_copies_of_the_reference_get_nothing_past_the_first_and_the_better_planner_takes_the_rest():
    window = [_instance(k, 0.6, 0.7 if k % 2 else 0.65) for k in range(10)]
    paid = _window_weights([ORACLE, REFERENCE, REFERENCE, REF_RENAMED, NAIVE], window)
    assert paid["payout"] == "margin" and paid["leaders"] == [0, 1, 1, 1, 4]
    assert paid["beater"] == [True, False, False, False, False]
    assert paid["weights"][0] == pytest.approx(1 - FLOOR)
    assert paid["weights"][1] > paid["weights"][4] > 0 and paid["weights"][2] == paid["weights"][3] == 0.0
    assert math.fsum(paid["weights"]) == pytest.approx(1.0)
    both = _window_weights([REFERENCE, REFERENCE], window)
    assert both["weights"] == [1.0, 0.0] and both["payout"] == "floor_only" and both["beater"] == [False, False]
    assert both["burning"] == [FLOOR, 0.0] and both["burned"] == pytest.approx(1 - FLOOR)  # the floor, as live


def test_the_attackers_plans_are_valid_and_the_same_program_or_another_one():
    families = [f for f in load_families() if f.task_id == "dt_inventory"]
    plans = static_plans(families)["dt_inventory"]
    plan = plans[GOOD].plan
    assert plan_digest(disguised(plan, 1)) == plan_digest(disguised(plan, 7)) == plan_digest(plan)
    assert disguised(plan, 1).nodes[0].id not in {node.id for node in plan.nodes}
    retried = plans[RETRIED].plan
    assert plan_digest(retried) != plan_digest(plan)
    assert WorkflowPlan.model_validate(retried.model_dump(by_alias=True)) == retried  # a plan a miner can send


def test_consensus_reads_ties_as_ties_and_names_the_largest_differences():
    same = _consensus([[0.9, 0.05, 0.05], [0.8, 0.1, 0.1]])
    assert same["same_order"] and same["max_rank_diff"] == 0 and same["max_weight_diff"] == pytest.approx(0.1)
    swapped = _consensus([[0.9, 0.06, 0.04], [0.9, 0.04, 0.06]])
    assert not swapped["same_order"] and swapped["max_rank_diff"] == 1


def _played(learner: float, public: float) -> dict[int, list[Instance]]:
    """Two validators' windows where every role has its own program: the reference at
    0.6 ± 0.1, each other role ``over`` it and 0.02 more on every other instance (the
    learner and public by ``learner`` and ``public``, the oracle by 0.08, the others below;
    a renamed copy is the same program, a ``max_parallel`` variant a little slower)."""
    overs = {GOOD: -0.2, RETRIED: -0.01, PUBLIC: public, ORACLE: 0.08, NAIVE: -0.3, LEARNER: learner}
    overs |= {"learner renamed": learner, "learner mp1": learner - 0.003, "learner mp2": learner - 0.002}
    overs |= {"oracle renamed": 0.08, "oracle mp1": 0.08 - 0.003, "oracle mp2": 0.08 - 0.002}
    played = {}
    for v in (0, 1):
        instances = []
        for k in range(12):
            ref = 0.6 + 0.1 * ((k * (v + 3)) % 3 - 1)
            answers = {name: Answer(f"{name}{k}", ref + over + 0.02 * (k % 2)) for name, over in overs.items()}
            answers["learner renamed"] = replace(answers["learner renamed"], digest=answers[LEARNER].digest)
            answers["oracle renamed"] = replace(answers["oracle renamed"], digest=answers[ORACLE].digest)
            answers |= {REFERENCE: Answer(f"r{k}", ref), REF_RENAMED: Answer(f"r{k}", ref)}
            instances.append(Instance(v, k, f"f{k}", 1, answers))  # a world an instance
        played[v] = instances
    return played


def _targets(learner: float, public: float = -0.01) -> dict[str, str]:
    played = _played(learner, public)
    gains = {name: _gain(name, played, played) for name in played[0][0].answers if name != REFERENCE}
    result = {"secrets": [0, 1], "networks": [_network(net, played) for net in NETWORKS], "gains": gains}
    targets = margin_targets(result)
    assert targets_line(targets).startswith(f"targets: {sum(t.holds for t in targets)} of {len(targets)} hold")
    return {t.name: t.verdict() for t in targets}


def test_every_target_holds_when_only_honest_beaters_beat_the_reference():
    assert set(_targets(learner=0.1).values()) == {"ok"}


def test_the_learner_targets_say_n_a_not_ok_where_the_learner_is_no_beater():
    verdicts = _targets(learner=-0.01)
    learners = {name: v for name, v in verdicts.items() if "learner" in name}
    assert len(learners) == 3
    assert set(learners.values()) == {"n/a: the learner is not a beater on validator 0, 1"}
    real = next(name for name in verdicts if name.startswith("a real planner"))
    assert verdicts[real].startswith("n/a: the learner (") and verdicts[real].endswith(
        "plan changed on 100%) is not such a planner"
    )
    assert all(v == "ok" for name, v in verdicts.items() if name not in learners and name != real)


def test_the_real_planner_target_reads_a_planner_that_plans_not_one_that_sends_the_references_plan():
    """The learner 16 % ahead on every instance, its plan its own: paid by both validators
    (ok); the same learner with the reference's plan on 11 instances of 12 says nothing of
    a planner that plans (n/a), however far ahead its one chosen instance puts it."""
    real = "a real planner ≥ 2 % better, its plan changed on most instances, is paid as a beater by every validator"
    assert _targets(learner=0.1)[real] == "ok"
    played = _played(0.1, -0.01)
    for instances in played.values():
        for instance in instances[1:]:
            instance.answers[LEARNER] = instance.answers[REFERENCE]
    gains = {LEARNER: _gain(LEARNER, played, played)}
    result = {"secrets": [0, 1], "networks": [_network(net, played) for net in NETWORKS], "gains": gains}
    verdict = next(t for t in margin_targets(result) if t.name == real).verdict()
    assert verdict.startswith("n/a: the learner (+") and "plan changed on 8%" in verdict


def test_a_planner_on_public_information_that_beats_the_reference_misses_its_target():
    verdicts = _targets(learner=0.1, public=0.1)
    assert verdicts["public is not a beater: at most the floor"] == (
        "miss: public beside 8 reference (validator 0), public beside 8 reference (validator 1)"
    )


def test_a_tiny_bench_pays_every_network_against_bench_world_s_reference(monkeypatch):
    monkeypatch.syspath_prepend(str(LEARNER_PATH))
    families = [f for f in load_families() if f.task_id in ("dt_inventory", "dt_grades", "rag_comets")]
    learner = "learner_planner:Learner"
    result = run_margin_bench(  # one draw an instance, as bench world plays it
        validators=2, first_secret=5, tempos=2, drawn=0, worlds=2, learner=learner, families=families, draws=1
    )
    assert result["learner"] and result["secrets"] == [5, 6] and RETRIED in result["gains"]
    assert REFERENCE not in result["gains"] and PUBLIC in result["gains"]
    world = run_world_bench(
        tempos=2, seeds=1, final_seeds=1, secrets=2, first_secret=5, learner=learner, families=families
    )
    for name, gain in result["gains"].items():  # the yardstick is bench world's reference, instance by instance
        assert gain["all"]["reference_S"] == pytest.approx(world["summary"]["all"]["mean_S"][REFERENCE], abs=1e-12)
        if name in world["summary"]["all"]["mean_S"]:
            assert gain["all"]["mean_S"] == pytest.approx(world["summary"]["all"]["mean_S"][name], abs=1e-12)
    assert [n["name"] for n in result["networks"]] == [net.name for net in NETWORKS]
    for net in result["networks"]:
        assert set(net["per_validator"]) == {"5", "6"}
        for paid in net["per_validator"].values():
            assert len(paid["weights"]) == net["miners"] and all(0 <= w <= 1 for w in paid["weights"])
            assert math.fsum(paid["weights"]) == pytest.approx(1.0)
            refs = [m for role, m in zip(net["roles"], paid["margin"]) if role == REFERENCE]
            assert all(m == 0.0 for m in refs)  # a copy of the reference has no margin over it
        assert all(0 <= v <= 1 + 1e-9 for v in net["yuma"]["vtrust"])
    copy = result["gains"][REF_RENAMED]["all"]
    assert copy["margin"] == 0.0 and copy["sd"] == 0.0  # a renamed copy of the reference runs as it does
    console = Console(width=200, record=True, color_system=None)
    render_margin_bench(result, console)
    text = console.export_text()
    assert "64 identical learners" in text and "target: vtrust ≥ 0.95 for every validator in every network:" in text
    assert "S against the reference (good on" in text and "(good)" not in text


def test_the_bench_draws_each_instance_as_a_validator_does():
    """With several draws an instance's S is its mean over them: the reference's moves, a
    copy of it still has margin 0.0 on every instance."""
    families = [f for f in load_families() if f.task_id in ("dt_inventory", "rag_comets")]
    one, two = (
        run_margin_bench(validators=1, first_secret=5, tempos=1, drawn=0, families=families, draws=d) for d in (1, 2)
    )
    assert (one["draws"], two["draws"]) == (1, 2)
    assert one["gains"][RETRIED]["all"]["reference_S"] != two["gains"][RETRIED]["all"]["reference_S"]
    for net in two["networks"]:
        for paid in net["per_validator"].values():
            assert all(m == 0.0 for role, m in zip(net["roles"], paid["margin"]) if role == REFERENCE)
