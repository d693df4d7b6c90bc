"""The executor bounds what a plan can make the validator spend and build.

- Every retry faces the budget ceiling exactly as a first attempt does.
- A node estimated at 0 still holds, while in flight, the largest attempt cost seen
  so far in the run, so zero estimates cannot hide spending from the ceiling.
- A node whose resolved params would pass ``max_params_bytes`` is blocked with
  ``params_too_large`` before its params are built.
"""

from __future__ import annotations

import pytest

from engine.executor import execute
from protocol.limits import Limits
from protocol.output import NodeOutput
from protocol.runner import NodeCall, NodeResult
from support.plans import node, plan


class PricedRunner:
    """Charges ``params["cost"]`` per attempt and fails the first ``params["fail"]`` attempts."""

    def __init__(self) -> None:
        self.calls: list[NodeCall] = []

    async def run(self, call: NodeCall) -> NodeResult:
        self.calls.append(call)
        cost = call.params.get("cost", 0.0)
        if call.attempt <= call.params.get("fail", 0):
            return NodeResult(None, cost_tao=cost, error=f"planned failure {call.attempt}")
        return NodeResult(NodeOutput(text=str(call.params.get("text", "ok"))), cost_tao=cost)


async def test_retries_are_refused_once_the_ceiling_is_reached() -> None:
    """Issue: 11 attempts of a node estimated at 0 spent 0.11 against a 0.015 ceiling."""
    p = plan(node("a", cost=0.01, fail=10), node("b"), edges="a>b", error_handling={"a": {"retry_count": 10}})
    runner = PricedRunner()
    ex = await execute(p, runner, task_id="t", budget_ceiling=0.015, deadline_s=None)
    assert ex.metrics.cost_tao == pytest.approx(0.02)  # two attempts: the second still fit
    assert ex.nodes["a"].attempts == 2 and ex.nodes["a"].status == "failed"
    assert ex.nodes["a"].reason.endswith("retry refused: budget_ceiling")
    assert ex.nodes["b"].status == "budget_abort" and ex.status == "budget_abort"


async def test_retries_within_the_ceiling_still_run() -> None:
    p = plan(node("a", cost=0.01, fail=2), error_handling={"a": {"retry_count": 2}})
    ex = await execute(p, PricedRunner(), task_id="t", budget_ceiling=1.0, deadline_s=None)
    assert ex.nodes["a"].status == "success" and ex.nodes["a"].attempts == 3


async def test_zero_estimates_hold_the_dearest_attempt_seen() -> None:
    """After the first node charged 0.01, each zero-estimate node holds 0.01 while in flight.

    As for first attempts everywhere, a node is dispatched while what is spent and held
    is under the ceiling, so the last one dispatched may pass it by its own cost.
    """
    nodes = [node("first", cost=0.01)] + [node(f"n{i}", cost=0.01) for i in range(10)]
    p = plan(*nodes, edges=" ".join(f"first>n{i}" for i in range(10)))
    runner = PricedRunner()
    ex = await execute(p, runner, task_id="t", budget_ceiling=0.035, deadline_s=None)
    assert ex.metrics.cost_tao == pytest.approx(0.04)  # without the holding: all 11, 0.11
    assert len(runner.calls) == 4 and ex.status == "budget_abort"


async def test_params_over_the_cap_block_the_node_before_they_are_built() -> None:
    p = plan(
        node("big", text="x" * 1000),
        node("fits", items=["${big.output.text}"] * 3),
        node("over", items=["${big.output.text}"] * 5),
        node("after", t="${over.output.text}"),
        edges="big>fits big>over over>after",
    )
    runner = PricedRunner()
    ex = await execute(
        p, runner, task_id="t", budget_ceiling=None, deadline_s=None, limits=Limits(max_params_bytes=4_000)
    )
    assert ex.nodes["fits"].status == "success"
    assert ex.nodes["over"].status == "blocked"
    size = len('{"items":[]}') + 5 * len('"' + "x" * 1000 + '"') + 4  # five values, four commas
    assert ex.nodes["over"].reason == f"params_too_large:{size}>4000"
    assert ex.nodes["after"].reason == "ancestor_failed:over"
    assert [c.node_id for c in runner.calls] == ["big", "fits"]
