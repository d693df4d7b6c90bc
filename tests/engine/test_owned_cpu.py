"""One plan's work is bounded however parallel its nodes: every piece of an attempt's work
reserves from the plan's allowance before it runs (engine/owned.py, engine/budget.py).

The tests count attempts that did their work, not seconds: each burns (or waits) a known
amount, so "at most the allowance plus one attempt" is a count."""

from __future__ import annotations

import threading
import time

import pytest

from engine.budget import Allowance
from engine.owned import CPU_EXHAUSTED, OwnedLimits, run_owned
from engine.simclock import run_simulated
from protocol.output import NodeOutput
from protocol.plan import WorkflowPlan
from protocol.synapse import Constraints, ToolInfo
from protocol.task import Task
from protocol.validation import check_plan_for
from subnets.base import ToolRegistry, ToolResult, ToolSpec, run_in_thread
from subnets.runner import LocalRunner

PIECE_S = 0.1
"""What each attempt's work costs: CPU burnt, or wall time waited."""

CAP_S = 0.35


def _task(subnet_type: str) -> Task:
    return Task(
        task_id="cpu",
        task_type="agent",
        constraints=Constraints(max_budget_tao=10.0, max_latency_seconds=60.0),
        available_tools={"sn": ToolInfo(type=subnet_type, avg_latency=0.5)},
    )


def _plan(action: str, n: int, params: dict) -> WorkflowPlan:
    return WorkflowPlan.model_validate(
        {
            "nodes": [{"id": f"n{i}", "subnet": "sn", "action": action, "params": params} for i in range(n)],
            "edges": [],
            "max_parallel": 64,
        }
    )


def _run(action: str, subnet_type: str, work, n: int):
    """Run ``n`` parallel nodes whose tool does ``work`` in a worker thread (inline on the
    simulated loop, as the sandbox's program does); return the execution and how many did it."""
    done: list[str] = []

    def tool(params: dict, ctx) -> ToolResult:
        work()
        done.append(ctx.node_id)
        return ToolResult(NodeOutput(text="ok"))

    registry = ToolRegistry()
    registry.register(ToolSpec(name=action, fn=run_in_thread(tool)))
    task = _task(subnet_type)
    plan = _plan(action, n, {"code": "print(1)"} if action == "python_exec" else {"data": [], "ops": []})
    runner = LocalRunner(registry, subnets=task.available_tools)
    execution = run_owned(
        plan,
        check_plan_for(plan, task),
        task,
        runner,
        owned=OwnedLimits(cpu_per_plan_s=CAP_S, attempt_reserve_s=PIECE_S),
        total_estimated_cost=None,
    )
    return execution, done


def _burn() -> None:
    until = time.thread_time() + PIECE_S
    while time.thread_time() < until:
        pass


def _wait() -> None:
    time.sleep(PIECE_S)


@pytest.mark.parametrize(
    ("action", "subnet_type", "work"),
    [
        ("json_transform", "data", _burn),  # tools' CPU
        ("python_exec", "exec", _wait),  # a sandboxed program's time: no CPU of the validator's thread
    ],
)
def test_parallel_nodes_cannot_overdraw_a_plans_allowance(action, subnet_type, work):
    # 12 nodes start together and all wait their subnet's latency before working: the old
    # check at the start of each attempt let all 12 work (and python_exec was never counted).
    execution, done = _run(action, subnet_type, work, 12)
    assert len(done) <= CAP_S / PIECE_S + 1  # the allowance, plus the one attempt that crossed it
    refused = [n for n in execution.nodes.values() if n.reason and CPU_EXHAUSTED in n.reason]
    assert len(done) + len(refused) == 12


def test_an_honest_plan_far_below_the_allowance_runs_whole():
    execution, done = _run("json_transform", "data", lambda: None, 12)
    assert len(done) == 12
    assert execution.status == "completed"


def test_a_closed_allowance_refuses_further_work_at_once():
    closed = threading.Event()
    allowance = Allowance(100.0, 1.0, closed)
    held = allowance.reserve()
    assert held == 1.0
    closed.set()
    assert allowance.reserve() is None
    allowance.settle(held, 0.25)
    assert allowance.spent == 0.25


def test_reservations_bound_concurrent_work_to_the_cap_plus_one_worst_case():
    allowance = Allowance(10.0, 4.0)
    held = [allowance.reserve() for _ in range(5)]
    assert held == [4.0, 4.0, 4.0, None, None]  # 12 reserved: the third was admitted at 8 < 10


def test_a_cancelled_attempt_is_charged_and_cancellation_passes_through():
    import asyncio

    allowance = Allowance(1.0, 0.5)

    async def attempt():
        await asyncio.sleep(10)

    async def main():
        from engine.owned import _MeteredAttempt

        task = asyncio.ensure_future(_MeteredAttempt(attempt(), allowance))
        await asyncio.sleep(1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run_simulated(main())
    assert allowance.spent >= 0.0 and allowance.reserve() == 0.5  # nothing left held
