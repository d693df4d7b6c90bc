"""The attacker strategies a local network runs: what they answer and how they score."""

from __future__ import annotations

import pytest

from neurons.localrun import run_document
from planners import PlanningError, load_planner
from protocol.documents import PlanDocument
from protocol.task import Task
from tasks import Family, family, load_families

HIDDEN = 777
ONE_PER_TYPE = [
    next(f for f in load_families() if f.task_type == t) for t in ("data_transform", "rag", "agent", "code")
]


async def _score(strategy: str, task: Task) -> dict:
    proposal = load_planner(strategy).plan(task.package())
    return await run_document(PlanDocument(proposal.plan, proposal.total_estimated_cost, "synapse"), task=task)


async def test_invalid_plans_are_rejected_before_anything_runs() -> None:
    found = family("rag_towns")
    report = await _score("invalid", found.task(found.example()))
    assert report["status"] == "invalid" and report["score"]["S"] == 0
    assert any("cycle" in error for error in report["errors"])


@pytest.mark.parametrize("found", ONE_PER_TYPE, ids=lambda f: f.task_id)
async def test_the_public_example_s_reference_is_right_only_on_the_public_example(found: Family) -> None:
    on_example = await _score("precompute", found.task(found.example()))
    assert on_example["status"] == "completed" and on_example["score"]["output_quality"] > 0.9
    hidden = found.task(found.instance(HIDDEN))
    stored, naive = await _score("precompute", hidden), await _score("naive", hidden)
    assert stored["score"]["output_quality"] < 0.5
    assert stored["score"]["S"] <= naive["score"]["S"]


async def test_a_wrong_stored_answer_scores_zero() -> None:
    found = family("agent_difference_towns")
    report = await _score("precompute", found.task(found.instance(HIDDEN)))
    assert report["score"]["output_quality"] == 0 and report["score"]["S"] == 0


async def test_a_synthetic_variant_is_recognised_by_its_description() -> None:
    variant = family("rag_towns").synthetic(5)
    plan = load_planner("precompute").plan(variant.package).plan
    assert [node.action for node in plan.nodes] == ["text_transform"]
    assert "Draquiva" in plan.nodes[0].params["text"]


def test_a_package_that_matches_no_public_family_is_not_planned() -> None:
    package = family("rag_towns").package.model_copy(update={"description": "Something nobody published."})
    with pytest.raises(PlanningError, match="matches no public family"):
        load_planner("precompute").plan(package)
