"""The run report: the keys of docs/cli.md for scripts, and a readable rendering for people."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from engine.executor import Execution, execute
from engine.report import run_report
from protocol.output import NodeOutput
from protocol.plan import WorkflowPlan
from protocol.runner import NodeCall, NodeResult
from render.report import DISPLAY_OUTPUT_CHARS, render_report

REQUIRED = {
    "status",
    "completion_ratio",
    "steps_completed",
    "total_steps",
    "latency_s",
    "cost_tao",
    "budget_ceiling",
    "retries",
    "unplanned_retries",
    "timeouts",
    "hard_failures",
    "tiers",
    "critical_path_s",
    "nodes",
    "final_output",
}
NODE_KEYS = {"status", "reason", "attempts", "cost_tao", "started_s", "finished_s", "attempt_log", "output"}


class _Runner:
    """Node ``bad`` fails; every other node answers its ``text`` param at a cost of 0.1."""

    async def run(self, call: NodeCall) -> NodeResult:
        if call.node_id == "bad":
            return NodeResult(None, cost_tao=0.1, error="nope")
        return NodeResult(NodeOutput(text=call.params.get("text", "")), cost_tao=0.1)


def _plan(doc: dict) -> WorkflowPlan:
    return WorkflowPlan.model_validate(doc)


async def _execution(final_text: str = "done") -> Execution:
    plan = _plan(
        {
            "nodes": [
                {"id": "a", "subnet": "s", "action": "echo", "params": {"text": "x"}, "estimated_latency": 0.5},
                {"id": "bad", "subnet": "s", "action": "echo", "estimated_latency": 1.0},
                {"id": "c", "subnet": "s", "action": "echo", "params": {"text": final_text + "${a.output.text}"}},
            ],
            "edges": [{"from": "a", "to": "c"}, {"from": "bad", "to": "c"}],
        }
    )
    return await execute(plan, _Runner(), task_id="t", budget_ceiling=2.0, deadline_s=None)


async def test_report_has_every_required_key_and_is_json() -> None:
    report = run_report(await _execution())
    assert REQUIRED <= report.keys()
    assert "score" not in report
    assert json.loads(json.dumps(report)) == report
    assert set(report["nodes"]) == {"a", "bad", "c"}
    for record in report["nodes"].values():
        assert set(record) == NODE_KEYS


async def test_report_values_follow_the_execution() -> None:
    report = run_report(await _execution())
    assert report["status"] == "partial"
    assert (report["steps_completed"], report["total_steps"]) == (2, 3)
    assert report["completion_ratio"] == pytest.approx(2 / 3)
    assert report["cost_tao"] == pytest.approx(0.3)
    assert report["budget_ceiling"] == 2.0
    assert report["hard_failures"] == 1
    assert report["tiers"] == [["a", "bad"], ["c"]]
    assert report["critical_path_s"] == 1.0
    assert report["nodes"]["bad"]["reason"] == "nope"
    assert report["nodes"]["c"]["output"]["text"] == "donex"
    assert report["final_output"] == report["nodes"]["c"]["output"]
    assert report["output_node"] == "c"


async def test_score_is_included_when_given() -> None:
    score = {"S": 0.5, "S_success": 0.4}
    assert run_report(await _execution(), score=score)["score"] == score


async def test_invalid_plan_report_names_errors_and_zeroes_metrics() -> None:
    plan = _plan({"nodes": [{"id": "a", "subnet": "s", "action": "echo"}], "edges": [{"from": "a", "to": "a"}]})
    report = run_report(await execute(plan, _Runner(), task_id="t", budget_ceiling=None, deadline_s=None))
    assert report["status"] == "invalid"
    assert report["errors"] and "self loop" in report["errors"][0]
    assert (report["completion_ratio"], report["cost_tao"], report["steps_completed"]) == (0.0, 0.0, 0)
    assert report["total_steps"] == 1
    assert report["nodes"] == {} and report["final_output"] is None


def _render(report: dict) -> str:
    console = Console(record=True, width=140, color_system=None)
    render_report(report, console)
    return console.export_text()


async def test_render_shows_nodes_summary_and_clipped_output() -> None:
    long_text = "y" * (DISPLAY_OUTPUT_CHARS + 50)
    report = run_report(await _execution(long_text), score={"S": 0.25})
    text = _render(report)
    for needle in ("partial", "bad", "nope", "failed", "success", "completed 2/3 steps", "0.25"):
        assert needle in text
    assert long_text not in text
    assert "more characters" in text


async def test_render_invalid_report_lists_errors() -> None:
    plan = _plan({"nodes": [{"id": "a", "subnet": "s", "action": "echo"}], "edges": [{"from": "a", "to": "a"}]})
    report = run_report(await execute(plan, _Runner(), task_id="t", budget_ceiling=None, deadline_s=None))
    text = _render(report)
    assert "invalid" in text and "self loop" in text and "final output: none" in text
