"""Feedback nodes built from an execution: every attempt, bounded in size."""

from __future__ import annotations

from engine.feedback import node_feedback
from engine.owned import evaluate_owned
from planners import load_planner
from protocol.feedback import MAX_REASON_CHARS, StepFeedback, clip_reason
from protocol.validation import check_plan_for
from subnets.owned import owned_runner
from tasks import family


def _run(family_id: str, seed: int, planner: str = "good"):
    found = family(family_id)
    task = found.task(found.instance(seed))
    plan = load_planner(planner).plan(found.package).plan
    return plan, evaluate_owned(plan, check_plan_for(plan, task), task, owned_runner(task), total_estimated_cost=0.0)


def test_every_node_is_listed_with_its_attempts_and_subnet() -> None:
    plan, evaluation = _run("rag_towns", 3)
    nodes, omitted = node_feedback(plan, evaluation.execution)
    assert omitted == 0 and [n.node_id for n in nodes] == list(evaluation.execution.nodes)
    for node in nodes:
        record = evaluation.execution.nodes[node.node_id]
        assert node.subnet == next(p.subnet for p in plan.nodes if p.id == node.node_id)
        assert len(node.attempts) == record.attempts and node.cost_tao == record.cost_tao


def test_a_flaky_subnets_failed_attempts_are_in_the_feedback() -> None:
    """naive on dt_staff runs a node on a subnet that fails its first attempt: the failed
    attempt is told, with its error, and the node's status is what the execution says."""
    plan, evaluation = _run("dt_staff", 1, "naive")
    nodes, _ = node_feedback(plan, evaluation.execution)
    failed = [a for n in nodes for a in n.attempts if not a.ok]
    assert failed and all("unavailable" in a.error for a in failed)
    assert [n.status for n in nodes] == [r.status for r in evaluation.execution.nodes.values()]


def test_a_step_feedback_round_trips_and_reasons_are_cut() -> None:
    plan, evaluation = _run("dt_sales", 2)
    nodes, omitted = node_feedback(plan, evaluation.execution)
    message = StepFeedback(
        validator_hotkey="5V",
        miner_uid=3,
        block=40,
        tempo=1,
        task_id="dt_sales",
        hint_tier="goal",
        outcome=evaluation.execution.status,
        score={"S": evaluation.score.S},
        nodes=nodes,
        nodes_omitted=omitted,
    )
    assert StepFeedback.model_validate_json(message.model_dump_json()) == message
    assert len(clip_reason("x" * 10_000)) == MAX_REASON_CHARS
