"""The example learner (examples/learner-planner): what it learns from feedback changes its plans."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from engine.feedback import node_feedback
from engine.owned import evaluate_owned
from planners import load_planner
from planners.public import reference_plan
from protocol.canonical import plan_digest
from protocol.feedback import AttemptFeedback, NodeFeedback, StepFeedback
from protocol.forecast import SubnetForecast
from protocol.synapse import TaskPackage
from protocol.validation import check_plan_for
from subnets.forecast import Forecast, forecast, forecast_world, with_forecast
from subnets.owned import owned_runner
from subnets.world import world_for
from tasks import family

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "learner-planner"))
import learner_planner.learner as learner_planner  # noqa: E402
import learner_planner.tempo as this_tempo  # noqa: E402
from learner_planner import Learner  # noqa: E402

PACKAGE = family("rag_towns").package
"""``good`` puts both retrieval steps on sn18; sn22 and sn5 offer retrieval too."""


def _feedback(
    subnet: str, *, failing: bool, tempo: int, nodes: int = 2, latency_s: float = 0.1, then_ok: bool = False
) -> StepFeedback:
    """``nodes`` nodes on ``subnet``: three failed attempts each when ``failing`` (then one
    that succeeds when ``then_ok``), else one attempt that succeeds."""
    error = "unavailable" if failing else None
    attempts = [AttemptFeedback(started_s=0.0, latency_s=latency_s, error=error) for _ in range(3 if failing else 1)]
    if failing and then_ok:
        attempts.append(AttemptFeedback(started_s=0.0, latency_s=latency_s))
    return StepFeedback(
        validator_hotkey="5V",
        miner_uid=1,
        block=tempo * 360,
        tempo=tempo,
        task_id="rag_towns",
        hint_tier="full",
        outcome="partial" if failing else "completed",
        nodes=[
            NodeFeedback(
                node_id=f"find_{i}",
                subnet=subnet,
                action="search",
                status="failed" if failing else "success",
                cost_tao=0.0027 * len(attempts),
                attempts=attempts,
            )
            for i in range(nodes)
        ],
    )


def _subnets(planner: Learner) -> set[str]:
    plan = planner.plan(PACKAGE).plan
    assert check_plan_for(plan, PACKAGE).valid
    return {node.subnet for node in plan.nodes}


def test_without_feedback_it_plans_as_good_does() -> None:
    assert Learner().plan(PACKAGE).plan == load_planner("good").plan(PACKAGE).plan


def test_a_subnet_failing_every_attempt_is_no_longer_planned_on() -> None:
    learner = Learner()
    assert "sn18" in _subnets(learner)
    learner.observe(_feedback("sn18", failing=True, tempo=1))
    assert learner.stats["sn18"].failure_rate() == 1.0
    assert "sn18" not in _subnets(learner)
    assert not {"sn22", "sn5"}.isdisjoint(_subnets(learner))  # retrieval moved to another subnet


def test_old_failures_weigh_less_than_recent_successes() -> None:
    learner = Learner(half_life=1.0)
    learner.observe(_feedback("sn18", failing=True, tempo=1))
    for tempo in range(5, 9):
        learner.observe(_feedback("sn18", failing=False, tempo=tempo))
    assert learner.stats["sn18"].failure_rate() < 0.1
    assert "sn18" in _subnets(learner)


def test_a_slow_subnet_is_priced_at_what_it_took() -> None:
    learner = Learner()
    learner.observe(_feedback("sn18", failing=False, tempo=1, nodes=3, latency_s=40.0))
    assert learner.relearned(PACKAGE).available_tools["sn18"].avg_latency == pytest.approx(40.0)
    assert "sn18" not in _subnets(learner)


def test_the_only_subnet_of_its_kind_is_kept_with_every_retry() -> None:
    learner = Learner()
    learner.observe(_feedback("sn18", failing=True, tempo=1))
    package = PACKAGE.model_copy(
        update={"available_tools": {s: i for s, i in PACKAGE.available_tools.items() if s not in ("sn22", "sn5")}}
    )
    assert learner.relearned(package).available_tools["sn18"].fail_first == 10


@pytest.mark.parametrize("rate", [0.05, 0.2, 0.5, 0.6])
def test_the_retries_make_a_node_succeed_as_often_as_asked(rate: float) -> None:
    retries = learner_planner.retries_for(rate, 0.99)
    assert rate ** (retries + 1) <= 0.01 < rate**retries


def test_nodes_on_a_flaky_subnet_declare_the_retries_it_needs() -> None:
    """Every retrieval subnet failed three attempts in four: whichever ``good`` keeps, its
    nodes retry until they succeed 99 times in 100, far past ``good``'s one spare retry."""
    learner = Learner(success=0.99, prior=0.0)
    for subnet in ("sn18", "sn22", "sn5"):
        learner.observe(_feedback(subnet, failing=True, then_ok=True, tempo=1))
    plan = learner.plan(PACKAGE).plan
    assert check_plan_for(plan, PACKAGE).valid
    on_seen = [node for node in plan.nodes if node.subnet in learner.stats]
    assert on_seen
    needed = min(learner_planner.MAX_RETRIES, math.ceil(math.log(0.01) / math.log(0.75)) - 1)
    assert all(plan.error_handling[node.id].retry_count == needed for node in on_seen)


def test_in_a_world_that_behaves_as_advertised_it_learns_the_advertised_profiles() -> None:
    """Fed the feedback of good's real executions (owned execution plays every subnet as
    its profile says; sn13 fails the first attempt of every node), it learns those profiles back."""
    found, learner = family("rag_towns"), Learner()
    for seed in (1, 2, 3):
        task = found.task(found.instance(seed))
        plan = load_planner("good").plan(found.package).plan
        run = evaluate_owned(plan, check_plan_for(plan, task), task, owned_runner(task), total_estimated_cost=0.0)
        nodes, _ = node_feedback(plan, run.execution)
        learner.observe(
            StepFeedback(
                validator_hotkey="5V",
                miner_uid=1,
                block=seed,
                tempo=1,
                task_id=task.task_id,
                hint_tier="full",
                outcome=run.execution.status,
                nodes=nodes,
            )
        )
    advertised, learned = found.package.available_tools, learner.relearned(found.package).available_tools
    seen = [subnet for subnet, stats in learner.stats.items() if stats.attempts >= learner.min_attempts]
    assert any(advertised[subnet].fail_first for subnet in seen)  # a flaky subnet among them
    for subnet in seen:
        assert learned[subnet].fail_first == advertised[subnet].fail_first
        assert learned[subnet].avg_latency == pytest.approx(advertised[subnet].avg_latency)
        assert learned[subnet].avg_cost == pytest.approx(advertised[subnet].avg_cost)


def test_loaded_by_module_path() -> None:
    assert isinstance(load_planner("learner_planner:Learner", {"half_life": 3.0}), Learner)


def _outage_feedback(subnet: str, tempo: int) -> StepFeedback:
    """Two nodes on ``subnet`` in a run that met its outage: three quick refusals, then an answer in 2 s."""
    refused = AttemptFeedback(started_s=0.0, latency_s=0.02, error=f"subnet {subnet} unavailable: outage")
    answered = AttemptFeedback(started_s=0.1, latency_s=2.0)
    return StepFeedback(
        validator_hotkey="5V",
        miner_uid=1,
        block=tempo * 360,
        tempo=tempo,
        task_id="rag_towns",
        hint_tier="full",
        outcome="completed",
        nodes=[
            NodeFeedback(
                node_id=f"find_{i}",
                subnet=subnet,
                action="search",
                status="success",
                cost_tao=0.0027,
                attempts=[refused] * 3 + [answered],
            )
            for i in range(2)
        ],
    )


def test_an_outage_counts_once_per_run_and_never_as_a_fast_cheap_answer() -> None:
    """Refusals in an outage window say how often a run meets one, not how the subnet
    answers: its learned latency is that of its answers, and every run met the outage."""
    learner = Learner()
    for tempo in (1, 2):
        learner.observe(_outage_feedback("sn18", tempo))
    stats = learner.stats["sn18"]
    assert stats.outage_rate() == pytest.approx(1.0) and stats.failure_rate() == 0.0
    assert (
        "sn18" not in learner.relearned(PACKAGE).available_tools
    )  # down in every run: left out while its kind has another
    assert "sn18" not in _subnets(learner)
    kept = Learner(avoid_outages=2.0)  # never
    for tempo in (2, 2):
        kept.observe(_outage_feedback("sn18", tempo))
    assert kept.relearned(PACKAGE).available_tools["sn18"].avg_latency == pytest.approx(2.0)


def test_what_every_subnet_did_reaches_a_subnet_it_never_tried() -> None:
    """Every retrieval subnet it tried failed half its attempts: the text subnet that writes
    the answer, never tried, declares retries for that rate too, not good's one spare."""
    learner = Learner()
    for subnet in ("sn18", "sn22", "sn5"):
        for tempo in (1, 2):
            learner.observe(_feedback(subnet, failing=True, then_ok=True, tempo=tempo))
    plan = learner.plan(PACKAGE).plan
    good = load_planner("good").plan(PACKAGE).plan
    unseen = [node for node in plan.nodes if node.subnet not in learner.stats]
    assert unseen
    for node in unseen:
        assert plan.error_handling[node.id].retry_count > good.error_handling[node.id].retry_count


# With the validator's forecast (``TaskPackage.forecast``): what is public is where it starts.

SECRET, TEMPO = 1, 4


def _sent(validator: str = "5V") -> tuple[TaskPackage, Forecast]:
    """``PACKAGE`` as validator ``validator`` sends it in tempo ``TEMPO`` of secret
    ``SECRET``'s world, and the forecast its reference plans on."""
    tools = PACKAGE.available_tools
    prior = forecast({t: world_for(SECRET, t, tools) for t in range(TEMPO)}, TEMPO, tools)
    return with_forecast(PACKAGE, prior, validator), prior


def test_with_a_forecast_and_no_feedback_it_sends_the_references_plan() -> None:
    """Public information earns nothing: before it hears anything it plans exactly as the
    validator's reference does (a copy of the reference is paid at most the floor)."""
    package, prior = _sent()
    assert package.forecast is not None and set(package.forecast.subnets) == set(PACKAGE.available_tools)
    mine = Learner().plan(package).plan
    assert plan_digest(mine) == plan_digest(reference_plan(PACKAGE, prior).plan)


def test_outages_in_this_tempo_move_a_node_off_a_subnet_in_a_spell() -> None:
    """The reference's retrieval subnet met an outage in both runs this tempo of that
    validator: more likely than not in a spell, so the learner plans on another retrieval
    subnet; outages heard in another tempo, or from another validator's world, move nothing."""
    package, _ = _sent()
    assert "sn18" in {node.subnet for node in Learner().plan(package).plan.nodes}
    stale, elsewhere, now = Learner(), Learner(), Learner()
    stale.observe(_outage_feedback("sn18", TEMPO - 1))
    elsewhere.observe(_outage_feedback("sn18", TEMPO).model_copy(update={"validator_hotkey": "5Other"}))
    now.observe(_outage_feedback("sn18", TEMPO))
    assert this_tempo.spell_chance(0.15, 0.03, this_tempo.Tally(runs=2, outages=2)) > 0.5
    for unmoved in (stale, elsewhere):
        assert "sn18" in {node.subnet for node in unmoved.plan(package).plan.nodes}
    moved = now.plan(package).plan
    assert check_plan_for(moved, package).valid
    assert "sn18" not in {node.subnet for node in moved.nodes}
    assert {node.subnet for node in moved.nodes} & {"sn22", "sn5"}


def test_clean_runs_make_a_spell_less_likely_than_the_prior() -> None:
    quiet = this_tempo.Tally(runs=3, outages=0)
    assert this_tempo.spell_chance(0.15, 0.03, this_tempo.Tally()) == pytest.approx(0.15)
    assert this_tempo.spell_chance(0.15, 0.03, quiet) < 0.15 * 0.3
    assert this_tempo.spell_chance(0.0, 0.03, this_tempo.Tally(runs=5, outages=5)) == 0.0
    # an outage is weaker evidence where outages are common outside a spell
    assert this_tempo.spell_chance(0.15, 0.3, this_tempo.Tally(runs=1, outages=1)) < this_tempo.spell_chance(
        0.15, 0.03, this_tempo.Tally(runs=1, outages=1)
    )


def _run_on(subnet: str, tempo: int, *, cost: float, seconds: list[float], errors: list[str | None]) -> StepFeedback:
    """One node on ``subnet`` in tempo ``tempo``: attempts of ``seconds`` with ``errors``, costing ``cost``."""
    attempts = [AttemptFeedback(started_s=0.0, latency_s=s, error=e) for s, e in zip(seconds, errors)]
    node = NodeFeedback(
        node_id="find_0", subnet=subnet, action="search", status="success", cost_tao=cost, attempts=attempts
    )
    return StepFeedback(
        validator_hotkey="5V",
        miner_uid=1,
        block=tempo * 360,
        tempo=tempo,
        task_id=PACKAGE.task_id,
        hint_tier="full",
        outcome="completed",
        nodes=[node],
    )


def test_this_tempos_runs_set_its_price_and_move_its_latency_and_failures() -> None:
    """A call costs exactly its price, so one answer says the tempo's price; latency and
    failures move from the forecast as far as the fresh part's spread and the counts warrant."""
    package, _ = _sent()
    told = package.forecast.subnets["sn18"]
    advertised = PACKAGE.available_tools["sn18"]
    learner = Learner()
    learner.plan(package)  # the advertised profiles the feedback is read against
    unanswered = "subnet sn18 unavailable (attempt 1)"
    learner.observe(
        _run_on(
            "sn18",
            TEMPO,
            cost=3 * advertised.avg_cost,  # two answers at 1.5 × the advertised price; the failed attempt is free
            seconds=[4 * advertised.avg_latency] * 3,
            errors=[unanswered, None, None],
        )
    )
    world = learner.forecast_world(package.forecast)
    moved = world.subnets["sn18"]
    assert moved.price == pytest.approx(1.5)
    assert told.latency < moved.latency < 4  # towards 4 ×, not all the way
    assert told.fail_p < moved.fail_p < 1 / 3
    assert world.subnets["sn22"] == forecast_world(package.forecast).subnets["sn22"]  # unheard: as forecast


def test_what_one_run_says_of_a_tempo_is_weighed_against_the_forecast() -> None:
    told = SubnetForecast(
        latency=1.0, spread=0.3, tail_p=0.03, tail=3.0, price=1.0, fail_p=0.15, outage_p=0.03, degrade_p=0.0
    )
    one = this_tempo.learned(told, this_tempo.Tally(answered=1, timed=1, log_latency=math.log(2.0)), 0.0)
    many = this_tempo.learned(told, this_tempo.Tally(answered=400, timed=400, log_latency=400 * math.log(2.0)), 0.0)
    assert 1.0 < one["latency"] < 1.5 < many["latency"] < 2.0
    in_spell = this_tempo.learned(told, this_tempo.Tally(timed=400, log_latency=400 * math.log(3.0)), 1.0)
    assert in_spell["latency"] == pytest.approx(2.0, rel=0.01)  # a spell's 1.5 × is the spell's, not the subnet's
    failing = this_tempo.learned(told, this_tempo.Tally(answered=400, unanswered=200), 0.0)
    assert 0.45 < failing["fail_p"] < 0.5 and "degrade_p" not in failing and "price" not in failing
