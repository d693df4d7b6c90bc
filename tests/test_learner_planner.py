"""The example learner (examples/learner-planner): what it learns from feedback changes its plans."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from miner.planner import load_planner
from protocol.feedback import AttemptFeedback, NodeFeedback, StepFeedback
from protocol.validation import check_plan_for
from tasks import family

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "learner-planner"))
from learner_planner import Learner  # noqa: E402

PACKAGE = family("rag_towns").package
"""``good`` puts both retrieval steps on sn18; sn22 and sn5 offer retrieval too."""


def _feedback(subnet: str, *, failing: bool, tempo: int, nodes: int = 2, latency_s: float = 0.1) -> StepFeedback:
    error = "unavailable" if failing else None
    attempts = [AttemptFeedback(started_s=0.0, latency_s=latency_s, error=error) for _ in range(3 if failing else 1)]
    return StepFeedback(
        validator_hotkey="5V", miner_uid=1, block=tempo * 360, tempo=tempo, task_id="rag_towns", hint_tier="full",
        outcome="partial" if failing else "completed", nodes=[
            NodeFeedback(node_id=f"find_{i}", subnet=subnet, action="search", status="failed" if failing else "success",
                         cost_tao=0.0027 * len(attempts), attempts=attempts)
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
    assert learner.stats["sn18"].failure_rate == 1.0
    assert "sn18" not in _subnets(learner)
    assert not {"sn22", "sn5"}.isdisjoint(_subnets(learner))  # retrieval moved to another subnet


def test_old_failures_weigh_less_than_recent_successes() -> None:
    learner = Learner(half_life=1.0)
    learner.observe(_feedback("sn18", failing=True, tempo=1))
    for tempo in range(5, 9):
        learner.observe(_feedback("sn18", failing=False, tempo=tempo))
    assert learner.stats["sn18"].failure_rate < 0.1
    assert "sn18" in _subnets(learner)


def test_a_slow_subnet_is_priced_at_what_it_took() -> None:
    learner = Learner()
    learner.observe(_feedback("sn18", failing=False, tempo=1, nodes=3, latency_s=40.0))
    assert learner.relearned(PACKAGE).available_tools["sn18"].avg_latency == pytest.approx(40.0)
    assert "sn18" not in _subnets(learner)


def test_the_only_subnet_of_its_kind_is_kept_with_every_retry() -> None:
    learner = Learner()
    learner.observe(_feedback("sn18", failing=True, tempo=1))
    package = PACKAGE.model_copy(update={"available_tools": {
        s: i for s, i in PACKAGE.available_tools.items() if s not in ("sn22", "sn5")
    }})
    assert learner.relearned(package).available_tools["sn18"].fail_first == 10


def test_loaded_by_module_path() -> None:
    assert isinstance(load_planner("learner_planner:Learner", {"half_life": 3.0}), Learner)
