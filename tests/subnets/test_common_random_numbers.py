"""Common random numbers (subnets/world.py, ``draw_key``): a call's draws are keyed by
what the node does, not by what it is called, so a renamed, reordered and re-parallelised
copy of a plan runs bit-identically in a hidden world, and a plan that shares calls with
the reference draws the same dice on them: a margin measures the programs, not the dice."""

from __future__ import annotations

from engine.owned import evaluate_owned
from neurons.localrun import family_task
from planners import load_planner
from planners.attackers import disguised, renamed
from protocol.plan import WorkflowPlan
from protocol.validation import check_plan_for
from subnets.owned import owned_runner
from subnets.world import draw_key, world_for

FAMILIES = ("dt_inventory", "dt_grades", "rag_comets", "agent_trip")
"""Families whose plans run in milliseconds on owned execution (no sandbox)."""
WORLDS = [(secret, tempo) for secret in (3, 8) for tempo in (2, 5, 9)]


def with_retries(plan: WorkflowPlan, extra: int) -> WorkflowPlan:
    policies = {
        node.id: plan.policy(node.id).model_copy(update={"retry_count": plan.policy(node.id).retry_count + extra})
        for node in plan.nodes
    }
    return plan.model_copy(update={"error_handling": policies})


def _run(task, plan: WorkflowPlan, world, cost: float):
    return evaluate_owned(
        plan, check_plan_for(plan, task), task, owned_runner(task, world=world), total_estimated_cost=cost
    )


def test_a_renamed_reordered_reparallelised_copy_runs_bit_identically():
    """The same score object and final output in every world and instance tried, failures
    included (the copy is not a lucky re-draw of a plan that failed)."""
    good = load_planner("good")
    failed = 0
    for task_id in FAMILIES:
        for secret, tempo in WORLDS:
            task = family_task(task_id, 11 + tempo)
            proposal = good.plan(task.package())
            world = world_for(secret, tempo, task.available_tools)
            first = _run(task, proposal.plan, world, proposal.total_estimated_cost)
            copy = _run(
                task, disguised(proposal.plan, len(proposal.plan.nodes) + 3), world, proposal.total_estimated_cost
            )
            assert copy.score == first.score, (task_id, secret, tempo)
            assert copy.execution.final_output == first.execution.final_output
            failed += first.score.S_success < 1
    assert failed > 0  # the worlds fail some runs: identical failures are tested too


def test_a_plan_sharing_calls_with_the_reference_draws_the_same_dice_on_them():
    """``good`` with more retries on every node: each node ``good``'s plan ran to success
    runs the same attempts, at the same times, in the retrying plan; it wins only where
    ``good`` ran out of retries."""
    good = load_planner("good")
    compared = rescued = 0
    for task_id in FAMILIES:
        for secret, tempo in WORLDS:
            task = family_task(task_id, 11 + tempo)
            proposal = good.plan(task.package())
            world = world_for(secret, tempo, task.available_tools)
            ref = _run(task, proposal.plan, world, proposal.total_estimated_cost).execution
            more = _run(task, renamed(with_retries(proposal.plan, 4)), world, proposal.total_estimated_cost).execution
            by_index = list(more.nodes.values())
            for index, record in enumerate(ref.nodes.values()):
                if record.status != "success":
                    continue
                other = by_index[index]
                assert (other.attempt_log, other.cost_tao, other.output) == (
                    record.attempt_log,
                    record.cost_tao,
                    record.output,
                ), (task_id, secret, tempo)
                compared += 1
            rescued += ref.status != "completed" and more.status == "completed"
    assert compared > 50 and rescued > 0


def test_the_draw_key_is_what_the_call_does():
    assert draw_key("sn1", "echo", {"text": "a", "n": 1}) == draw_key("sn1", "echo", {"n": 1, "text": "a"})
    assert (
        len(
            {
                draw_key("sn1", "echo", {"text": "a"}),
                draw_key("sn2", "echo", {"text": "a"}),
                draw_key("sn1", "upper", {"text": "a"}),
                draw_key("sn1", "echo", {"text": "b"}),
            }
        )
        == 4
    )
