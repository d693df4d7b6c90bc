"""Attacks on the v2 families, as a miner would try them; each must score no more than
the naive planner on every family it applies to.

Every attack answers a hidden instance (seed ``HIDDEN``) without running its inputs
through the tools: an answer worked out on the public example, the example's reference
memorised, an answer emitted by ``echo`` or by an action the subnet does not offer,
nothing at all, or a flood of the dearest subnet with estimates of 0.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engine.evaluate import expected_prices, run_task
from planners import load_planner
from planners.attackers import answer_plan, example_answer
from protocol.plan import WorkflowPlan
from protocol.task import Task
from protocol.validation import check_plan_for
from subnets.registry import default_registry
from subnets.runner import LocalRunner
from support.attacks import gather, scored_run
from support.scale import cases
from tasks import Family, load_families

HIDDEN = 4242
FAMILIES = cases(load_families())
IDS = [f.task_id for f in FAMILIES]


def _hidden(family: Family) -> Task:
    return family.task(family.instance(HIDDEN))


@pytest.fixture(scope="module")
def naive() -> dict[str, float]:
    """The naive planner's S on each family's hidden instance."""

    async def score(family: Family) -> float:
        proposal = load_planner("naive").plan(family.package)
        return (await scored_run(proposal.plan, _hidden(family), proposal.total_estimated_cost))["score"]["S"]

    return dict(zip(IDS, asyncio.run(gather([score(f) for f in FAMILIES]))))


@pytest.fixture(scope="module")
def on_example() -> dict[str, dict]:
    """The good plan's final output on each family's public example: what a miner can
    work out on its own machine from the package alone."""

    async def output(family: Family) -> dict:
        proposal = load_planner("good").plan(family.package)
        report = await scored_run(proposal.plan, family.task(family.example()), proposal.total_estimated_cost)
        return report["final_output"] or {"text": "", "artifacts": {"code": "", "metadata": {}}}

    return dict(zip(IDS, asyncio.run(gather([output(f) for f in FAMILIES]))))


def _one_node(family: Family, answer: str, *, code: bool, action: str | None = None) -> WorkflowPlan:
    """One node that emits ``answer``; with ``action``, the same node calling ``echo`` or
    an action its subnet does not offer."""
    plan = answer_plan(family.package, answer, code=code)
    if action is None:
        return plan
    params: dict[str, Any] = (
        {"text": answer, "code": answer if code else ""} if action == "echo" else {"expression": "1 + 1"}
    )
    node = plan.nodes[0].model_copy(update={"action": action, "params": params})
    return plan.model_copy(update={"nodes": [node]})


def _memorised(family: Family) -> str:
    """The public example's reference, in the shape an answer takes."""
    return example_answer(family.example().reference)


def _attack(plans: dict[str, WorkflowPlan]) -> dict[str, dict]:
    async def run(task_id: str) -> dict:
        family = next(f for f in FAMILIES if f.task_id == task_id)
        return await scored_run(plans[task_id], _hidden(family))

    return dict(zip(plans, asyncio.run(gather([run(t) for t in plans]))))


def _assert_no_better_than_naive(reports: dict[str, dict], naive: dict[str, float]) -> None:
    worse = {t: (r["score"]["S"], naive[t]) for t, r in reports.items() if r["score"]["S"] > naive[t]}
    assert worse == {}
    assert all(r["score"]["output_quality"] < 1 for r in reports.values())  # wrong on the hidden instance


def test_an_answer_worked_out_on_the_public_example_earns_nothing(naive, on_example) -> None:
    plans = {}
    for family in FAMILIES:
        output = on_example[family.task_id]
        code = family.task_type == "code"
        plans[family.task_id] = _one_node(family, output["artifacts"]["code"] if code else output["text"], code=code)
    _assert_no_better_than_naive(_attack(plans), naive)


def test_the_memorised_example_reference_earns_nothing(naive) -> None:
    precompute = load_planner("precompute")
    plans = {f.task_id: precompute.plan(f.package).plan for f in FAMILIES}
    _assert_no_better_than_naive(_attack(plans), naive)


@pytest.mark.parametrize("action", ["echo", "calculator"])
def test_echo_or_an_action_the_subnet_does_not_offer_is_an_invalid_plan(naive, action) -> None:
    plans = {f.task_id: _one_node(f, _memorised(f), code=f.task_type == "code", action=action) for f in FAMILIES}
    reports = _attack(plans)
    assert {r["status"] for r in reports.values()} == {"invalid"}
    assert {r["score"]["S"] for r in reports.values()} == {0}


def test_doing_nothing_earns_nothing(naive) -> None:
    plans = {f.task_id: _one_node(f, "", code=False) for f in FAMILIES}
    reports = _attack(plans)
    _assert_no_better_than_naive(reports, naive)
    assert {r["score"]["S"] for r in reports.values()} == {0}


_FLOOD_PARAMS = {
    "text": ("text_transform", {"op": "upper", "text": "x"}),
    "data": ("json_transform", {"data": [], "ops": []}),
    "retrieval": ("search", {"query": "water", "k": 1}),
    "math": ("calculator", {"expression": "1 + 1"}),
}


@pytest.mark.parametrize("family", [f for f in FAMILIES if f.task_type != "code"], ids=lambda f: f.task_id)
def test_zero_estimates_and_a_flood_of_the_dearest_subnet_stay_within_the_budget(family, naive) -> None:
    task = _hidden(family)
    prices = expected_prices(task)
    allowed = [
        s
        for s in task.constraints.allowed_subnets or task.available_tools
        if task.available_tools[s].type in _FLOOD_PARAMS
    ]
    dearest = max(allowed, key=lambda s: prices[s])
    action, params = _FLOOD_PARAMS[task.available_tools[dearest].type]
    nodes = [{"id": f"n{i}", "subnet": dearest, "action": action, "params": params} for i in range(63)]
    plan = WorkflowPlan.model_validate({"nodes": nodes, "max_parallel": 64})
    runner = LocalRunner(default_registry(), subnets=task.available_tools)
    execution = asyncio.run(run_task(plan, check_plan_for(plan, task), task, runner, total_estimated_cost=0.0))
    assert execution.metrics.cost_tao <= task.constraints.max_budget_tao + prices[dearest] + 1e-12
    report = asyncio.run(scored_run(plan, task))
    assert report["score"]["S"] <= naive[family.task_id]
