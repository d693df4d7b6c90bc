"""Every run observable: `dagnet run --events` streams transitions, `--html` writes the run page."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from neurons.cli import app
from protocol.plan import WorkflowPlan
from render.runpage import render_run_page

ROOT = Path(__file__).resolve().parents[2]
OBSERVE = ROOT / "examples" / "observe.json"
FRAMES = ROOT / "examples" / "frames_delays.json"


def _run(*args: object):
    return CliRunner().invoke(app, ["run", *map(str, args)])


def _lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


def test_events_stream_every_transition_then_the_report():
    result = _run(OBSERVE, "--events")
    lines = _lines(result.stdout)
    *transitions, last = lines
    assert last["event"] == "report" and last["report"]["status"] == "partial"
    assert {line["event"] for line in transitions} == {"transition"}
    times = [line["t"] for line in transitions]
    assert times == sorted(times)
    by_node: dict[str, list[tuple[str, str, str | None]]] = {}
    for line in transitions:
        by_node.setdefault(line["node"], []).append((line["from"], line["to"], line["reason"]))
    ran = [("pending", "ready", None), ("ready", "running", None)]
    assert by_node["fetch"] == [*ran, ("running", "success", None)]
    assert by_node["parse"] == [*ran, ("running", "success", None)]  # a retry is no transition
    assert by_node["side"][:2] == ran and by_node["side"][2][:2] == ("running", "failed")
    assert by_node["use_side"] == [("pending", "ready", None), ("ready", "blocked", "ancestor_failed:side")]
    for node, steps in by_node.items():
        assert sum(1 for _, to, _ in steps if to == "ready") == 1, node
    assert set(by_node) == set(last["report"]["nodes"])


def test_events_report_budget_abort_with_its_reason(tmp_path):
    plan = {
        "nodes": [
            {"id": "a", "subnet": "s", "action": "echo", "params": {"text": "x", "cost": 1.0}, "estimated_cost": 1.0},
            {"id": "b", "subnet": "s", "action": "echo", "params": {"text": "${a.output.text}"}, "estimated_cost": 1.0},
        ],
        "edges": [{"from": "a", "to": "b"}],
    }
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"workflow_plan": plan, "total_estimated_cost": 0.5}))
    transitions = _lines(_run(path, "--events").stdout)[:-1]
    assert [(t["node"], t["to"], t["reason"]) for t in transitions if t["to"] == "budget_abort"] == [
        ("b", "budget_abort", "budget_ceiling")
    ]


def test_html_page_holds_the_dag_the_timeline_and_the_critical_path(tmp_path):
    out = tmp_path / "run.html"
    result = _run(OBSERVE, "--html", out, "--json")
    assert json.loads(result.stdout)["status"] == "partial"
    page = out.read_text(encoding="utf-8")
    assert '<svg id="dag"' in page and '<svg id="gantt"' in page
    for node in ("fetch", "parse", "side", "use_side", "summarise"):
        assert f'data-node="{node}"' in page
    assert "blocked: ancestor_failed:side" in page
    assert "fetch → parse → summarise" in page  # the measured critical path
    assert page.count('class="crit"') == 3 + 4 + 2  # 3 boxes, 4 attempt bars (parse ran twice), 2 edges
    assert "×2" in page  # parse and side each took two attempts


def test_report_and_page_carry_every_attempt_with_its_times(tmp_path):
    out = tmp_path / "run.html"
    report = json.loads(_run(OBSERVE, "--html", out, "--json").stdout)
    parse = report["nodes"]["parse"]
    log = parse["attempt_log"]
    assert [(a["attempt"], a["error"] is None) for a in log] == [(1, False), (2, True)]
    assert "planned failure" in log[0]["error"]
    assert parse["started_s"] == log[0]["started_s"] <= log[0]["finished_s"] <= log[1]["started_s"]
    assert log[1]["finished_s"] <= parse["finished_s"]
    assert all(a["finished_s"] - a["started_s"] >= 0.1 for a in log)  # echo's delay_s, per attempt
    assert [a["error"] is None for a in report["nodes"]["side"]["attempt_log"]] == [False, False]
    assert report["nodes"]["use_side"]["attempt_log"] == []  # blocked: never attempted
    page = out.read_text(encoding="utf-8")
    bars = re.findall(
        r'<rect data-kind="attempt" x="([\d.]+)" y="[\d.]+" width="([\d.]+)" height="\d+" fill="(#\w+)"', page
    )
    fills = [fill for _, _, fill in bars]
    assert fills.count("#2e7d32") == 3 and fills.count("#c62828") == 3  # 3 successful, 3 failed attempts
    assert len(bars) == sum(len(node["attempt_log"]) for node in report["nodes"].values())


def test_html_page_fetches_nothing_and_runs_only_its_own_script(tmp_path):
    out = tmp_path / "run.html"
    _run(OBSERVE, "--html", out)
    page = out.read_text(encoding="utf-8")
    urls = set(re.findall(r"https?://[^\"' )]+", page)) - {"http://www.w3.org/2000/svg"}
    assert urls == set()
    assert "default-src 'none'" in page and "script-src 'sha256-" in page
    assert page.count("<script>") == 1


def test_html_page_escapes_what_a_plan_or_tool_supplied():
    hostile = "<script>alert(1)</script>"
    plan = WorkflowPlan.model_validate({"nodes": [{"id": "a", "subnet": "s", "action": hostile}]})
    report = {
        "status": "partial",
        "errors": [hostile],
        "nodes": {"a": {"status": "failed", "reason": hostile, "attempts": 1, "started_s": 0.0, "finished_s": 0.1}},
        "final_output": {"text": hostile, "artifacts": {"code": hostile}},
        "output_node": "a",
    }
    page = render_run_page(plan, report, [], title=hostile)
    assert hostile not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_html_page_of_a_scored_run_shows_the_score_breakdown(tmp_path):
    out = tmp_path / "run.html"
    result = _run(ROOT / "examples" / "seed004_ages.json", "--html", out)
    assert result.exit_code == 0
    page = render_run_page(
        WorkflowPlan.model_validate({"nodes": [{"id": "a", "subnet": "s", "action": "echo"}]}),
        {
            "status": "completed",
            "nodes": {},
            "score": {
                "S": 0.9,
                "S_success": 1.0,
                "S_cost": 0.8,
                "S_latency": 0.6,
                "S_reliability": 1.0,
                "output_quality": 1.0,
                "completion_ratio": 1.0,
                "details": {"gate_open": True},
            },
        },
    )
    assert page.count('class="share"') == 4
    assert "0.25 × S_cost = 0.2000" in page


def test_html_page_of_an_invalid_plan_says_why(tmp_path):
    out = tmp_path / "run.html"
    result = _run(ROOT / "examples" / "cycle.json", "--html", out)
    assert result.exit_code == 2
    page = out.read_text(encoding="utf-8")
    assert "error: cycle: a -&gt; b -&gt; a" in page
    assert "not a valid graph" in page


def test_html_to_an_unwritable_path_fails_before_running(tmp_path):
    result = _run(OBSERVE, "--html", tmp_path / "missing-dir" / "run.html")
    assert result.exit_code == 2
    assert "cannot write" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("nodes", [500])
def test_html_page_of_a_large_plan_keeps_the_timeline(nodes):
    plan = WorkflowPlan.model_validate(
        {"nodes": [{"id": f"n{i}", "subnet": "s", "action": "echo"} for i in range(nodes)]}
    )
    page = render_run_page(plan, {"status": "completed", "nodes": {}})
    assert "too many to draw" in page
    assert page.count('data-node="') == nodes


def test_html_timeline_draws_each_frame_instance_under_its_node_with_its_attempts(tmp_path):
    out = tmp_path / "run.html"
    report = json.loads(_run(FRAMES, "--html", out, "--json").stdout)
    assert [i["status"] for i in report["nodes"]["work"]["instances"]] == ["success", "failed", "success"]
    page = out.read_text(encoding="utf-8")
    titles = re.findall(r'<g data-node="work"><title>([^<]*)</title>', page)
    assert [t.split(" (")[0] for t in titles] == [
        "work",
        "work",
        "work[0]",
        "work[1]",
        "work[2]",
    ]  # box, row, instances
    gantt = page[page.index('<svg id="gantt"') :]
    rows = gantt.split("<g data-node=")[1:]
    by_label = {re.search(r"<title>([^ ]+) ", row).group(1): row for row in rows}
    fills = {label: re.findall(r'data-kind="attempt"[^>]* fill="(#\w+)"', row) for label, row in by_label.items()}
    assert fills["work[0]"] == fills["work[2]"] == ["#2e7d32"]
    assert fills["work[1]"] == ["#c62828", "#c62828"]  # both attempts of frame 1 failed
    assert "ancestor_failed:work[1]" in page


def test_html_timeline_draws_at_most_max_instance_rows_per_node():
    from render.runpage import MAX_INSTANCE_ROWS

    plan = WorkflowPlan.model_validate(
        {
            "nodes": [{"id": "g", "subnet": "s", "action": "split"}, {"id": "n", "subnet": "s", "action": "echo"}],
            "edges": [{"from": "g", "to": "n"}],
        }
    )
    instance = {"status": "success", "reason": None, "attempts": 1, "started_s": 0.0, "finished_s": 1.0}
    report = {
        "status": "completed",
        "nodes": {
            "g": {"status": "success", "attempts": 1, "frames": MAX_INSTANCE_ROWS + 5},
            "n": {
                "status": "success",
                "attempts": 1,
                "instances": [{**instance, "frame": i} for i in range(MAX_INSTANCE_ROWS + 5)],
            },
        },
    }
    page = render_run_page(plan, report)
    assert page.count("<title>n[") == MAX_INSTANCE_ROWS
    assert "… and 5 more instances of n" in page


def test_html_page_of_a_task_run_names_the_task_and_seed_to_replay_it(tmp_path):
    out = tmp_path / "run.html"
    _run(ROOT / "examples" / "seed004_ages.json", "--task", "rag_towns", "--seed", "7", "--html", out)
    page = out.read_text()
    assert "<th>task</th><td>rag_towns</td>" in page and "<th>seed</th><td>7</td>" in page
    assert "dagnet run PLAN --task rag_towns --seed 7" in page


def test_html_page_without_a_task_shows_no_task_line(tmp_path):
    out = tmp_path / "run.html"
    _run(OBSERVE, "--html", out)
    assert "<th>task</th>" not in out.read_text()


def test_html_page_lists_every_failed_attempt_with_its_error(tmp_path):
    out = tmp_path / "run.html"
    result = _run(OBSERVE, "--json", "--html", out)
    report = json.loads(result.stdout)
    page = out.read_text()
    table = page[page.index('<table id="failures">') :]
    table = table[: table.index("</table>")]
    expected = [
        (node_id, attempt["attempt"], attempt["error"])
        for node_id, node in report["nodes"].items()
        for attempt in node["attempt_log"]
        if attempt["error"] is not None
    ]
    assert expected  # observe.json retries one node and fails another
    for node_id, attempt, message in expected:
        assert (
            f'<tr><td>{node_id}</td><td class="num">{attempt}</td><td class="err">{html.escape(message)}</td></tr>'
            in table
        )
    assert table.count("<tr><td>") == len(expected)


def test_html_page_shows_why_a_node_failed_before_any_attempt():
    plan = WorkflowPlan.model_validate({"nodes": [{"id": "a", "subnet": "s", "action": "echo"}]})
    report = {"status": "partial", "nodes": {"a": {"status": "failed", "reason": "no provider for s", "attempts": 0}}}
    page = render_run_page(plan, report)
    assert '<td>a</td><td class="num">-</td><td class="err">no provider for s</td>' in page
