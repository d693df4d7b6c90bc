"""The budget at the validator's prices: no plan, whatever it declares, makes the
validator spend more than ``max_budget_tao`` plus what its nodes in flight at the
crossing can cost."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.evaluate import ceiling, expected_prices, run_task
from protocol.output import NodeOutput
from protocol.plan import WorkflowPlan
from protocol.runner import NodeCall, NodeResult
from protocol.synapse import Constraints, ToolInfo
from protocol.task import Task
from protocol.validation import check_plan_for
from support.scale import examples

SUBNETS = {"cheap": 0.001, "mid": 0.004, "dear": 0.02}


class ChargingRunner:
    """Charges each attempt a drawn share of its subnet's expected price; some attempts fail."""

    def __init__(self, prices: dict[str, float], shares: list[float], failures: list[bool]) -> None:
        self.prices, self.shares, self.failures = prices, shares, failures
        self.calls = 0
        self.charged = 0.0

    async def run(self, call: NodeCall) -> NodeResult:
        k = self.calls
        self.calls += 1
        await asyncio.sleep(0)
        cost = self.prices[call.subnet] * self.shares[k % len(self.shares)]
        self.charged += cost
        if self.failures[k % len(self.failures)]:
            return NodeResult(None, cost_tao=cost, error="drawn failure")
        return NodeResult(NodeOutput(text="ok"), cost_tao=cost)


def _task(max_budget: float, top_k: int) -> Task:
    return Task(
        task_id="budget",
        task_type="agent",
        constraints=Constraints(max_budget_tao=max_budget, max_latency_seconds=30.0),
        available_tools={name: ToolInfo(type="text", avg_cost=cost) for name, cost in SUBNETS.items()},
        routing_policy={"default": {"top_k": top_k}},
    )


@st.composite
def _plans(draw: st.DrawFn) -> tuple[WorkflowPlan, float | None]:
    n = draw(st.integers(1, 64))
    subnets = draw(st.lists(st.sampled_from(sorted(SUBNETS)), min_size=n, max_size=n))
    estimates = draw(st.lists(st.sampled_from([0.0, 0.0, 1e-9, 0.0005, 0.01]), min_size=n, max_size=n))
    retries = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    edges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=n))
    nodes = [
        {
            "id": f"n{i}",
            "subnet": s,
            "action": "text_transform",
            "estimated_cost": e,
            "params": {"op": "upper", "text": "x"},
        }
        for i, (s, e) in enumerate(zip(subnets, estimates))
    ]
    plan = WorkflowPlan.model_validate(
        {
            "nodes": nodes,
            "edges": [{"from": f"n{min(a, b)}", "to": f"n{max(a, b)}"} for a, b in edges if a != b],
            "error_handling": {f"n{i}": {"retry_count": r} for i, r in enumerate(retries) if r},
            "max_parallel": draw(st.integers(1, 64)),
        }
    )
    declared = draw(st.sampled_from([None, 0.0, 1e-6]))
    return plan, declared


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    drawn=_plans(),
    max_budget=st.sampled_from([0.005, 0.03, 0.1]),
    top_k=st.integers(1, 3),
    shares=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=8),
    failures=st.lists(st.booleans(), min_size=1, max_size=8),
)
def test_no_plan_spends_past_the_budget_more_than_its_nodes_in_flight_can_cost(
    drawn, max_budget: float, top_k: int, shares: list[float], failures: list[bool]
) -> None:
    plan, declared = drawn
    task = _task(max_budget, top_k)
    prices = expected_prices(task)
    runner = ChargingRunner(prices, shares, failures)
    check = check_plan_for(plan, task)
    execution = asyncio.run(run_task(plan, check, task, runner, total_estimated_cost=declared))

    limit = ceiling(task, plan, declared)
    assert limit is not None and limit <= max_budget
    # At the last dispatch, spent + reservations (one price per node in flight) were
    # under the ceiling; after it, the nodes in flight can add their retries' prices
    # and one more node's price at most.
    retry_prices = sum(plan.policy(n.id).retry_count * prices[n.subnet] for n in plan.nodes)
    assert runner.charged <= limit + max(prices.values()) + retry_prices + 1e-12
    assert execution.metrics.cost_tao == pytest.approx(runner.charged, abs=1e-12)


def test_zero_estimates_and_a_flood_of_the_dearest_subnet_stop_at_the_budget() -> None:
    task = _task(0.05, 1)
    nodes = [
        {"id": f"n{i}", "subnet": "dear", "action": "text_transform", "params": {"op": "upper", "text": "x"}}
        for i in range(63)
    ]
    plan = WorkflowPlan.model_validate({"nodes": nodes, "max_parallel": 64})
    runner = ChargingRunner(expected_prices(task), [1.0], [False])
    execution = asyncio.run(run_task(plan, check_plan_for(plan, task), task, runner, total_estimated_cost=0.0))
    assert runner.charged <= 0.05 + SUBNETS["dear"] + 1e-12  # 63 × 0.02 = 1.26 without the floor
    assert execution.status == "budget_abort"
