"""A node on several providers (docs/execution.md, routing): aggregating their outputs, and
owned execution's ``top_k``."""

from __future__ import annotations

import asyncio

import pytest

from engine.owned import run_owned
from engine.routing import aggregate
from protocol.output import Artifacts, NodeOutput
from protocol.plan import PlanNode, WorkflowPlan
from protocol.runner import NodeCall, NodeResult
from protocol.synapse import Constraints, RoutingRule, ToolInfo
from protocol.task import Task
from protocol.validation import check_plan_for


def _out(text: str, code: str = "") -> NodeOutput:
    return NodeOutput(text=text, artifacts=Artifacts(code=code))


def test_majority_vote_returns_the_modal_output_with_its_artifacts() -> None:
    outputs = [_out("b", "first-b"), _out("a", "first-a"), _out("a", "second-a")]
    assert aggregate(outputs, "majority_vote") == _out("a", "first-a")


def test_majority_vote_tie_goes_to_the_first_tied_text_in_provider_order() -> None:
    assert aggregate([_out("x"), _out("y"), _out("y"), _out("x")], "majority_vote").text == "x"
    assert aggregate([_out("y"), _out("x"), _out("x"), _out("y")], "majority_vote").text == "y"


def test_majority_vote_of_one_is_that_output() -> None:
    only = _out("alone", "code")
    assert aggregate([only], "majority_vote") == only


def test_median_logit_odd_count_ignores_non_numeric() -> None:
    outputs = [_out("3"), _out("not a number"), _out(" 1.5 "), _out("10"), _out("inf")]
    assert aggregate(outputs, "median_logit") == _out("3")


def test_median_logit_even_count_takes_the_mean_of_the_middle_two() -> None:
    assert aggregate([_out("1"), _out("2"), _out("4"), _out("100")], "median_logit").text == "3"
    assert aggregate([_out("0.1"), _out("0.2")], "median_logit").text == repr((0.1 + 0.2) / 2)


def test_median_logit_with_no_numeric_text_is_none() -> None:
    assert aggregate([_out("yes"), _out(""), _out("nan")], "median_logit") is None


def test_no_outputs_is_none() -> None:
    assert aggregate([], "majority_vote") is None
    assert aggregate([], "median_logit") is None


def test_unknown_aggregation_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown aggregation"):
        aggregate([_out("1")], "mean")  # type: ignore[arg-type]


# -- owned execution's top_k: k providers, aggregated, charged k times ------------------------------


class Counting:
    """A profile's providers: each call answers the next of ``texts`` after 0.5 s at 0.25 TAO."""

    def __init__(self, *texts: str) -> None:
        self.texts, self.calls = list(texts), 0

    async def run(self, call: NodeCall) -> NodeResult:
        self.calls += 1
        await asyncio.sleep(0.5)
        return NodeResult(NodeOutput(text=self.texts[(self.calls - 1) % len(self.texts)]), cost_tao=0.25)


CALLS = {"llm": ("model", {"prompt": "q"}), "calculator": ("math", {"expression": "1 + 1"})}
"""An action's subnet type and params, for a one-node plan."""


def _owned(action: str, rule: RoutingRule, runner: Counting):
    kind, params = CALLS[action]
    task = Task(
        task_id="t",
        task_type="agent",
        routing_policy={"sn1": rule},
        constraints=Constraints(max_budget_tao=10.0, max_latency_seconds=10.0, allowed_subnets=["sn1"]),
        available_tools={"sn1": ToolInfo(type=kind, avg_cost=0.25, avg_latency=0.5)},
    )
    plan = WorkflowPlan(nodes=[PlanNode(id="n", subnet="sn1", action=action, params=params)])
    return run_owned(plan, check_plan_for(plan, task), task, runner, total_estimated_cost=None)


def test_owned_top_k_charges_every_provider_and_votes_on_model_answers() -> None:
    """A ``top_k: 3`` llm node asks three providers at once: its cost is three providers',
    its latency one provider's, its output the rule's median of their answers."""
    runner = Counting("1", "9", "2")
    execution = _owned("llm", RoutingRule(top_k=3, aggregation="median_logit"), runner)
    assert execution.final_output["text"] == "2" and runner.calls == 3
    assert execution.metrics.cost_tao == 0.75 and execution.metrics.latency_s == 0.5


def test_owned_top_k_runs_a_deterministic_action_once_and_charges_it_k_times() -> None:
    runner = Counting("same")
    execution = _owned("calculator", RoutingRule(top_k=2), runner)
    assert execution.final_output["text"] == "same" and runner.calls == 1
    assert execution.metrics.cost_tao == 0.5
