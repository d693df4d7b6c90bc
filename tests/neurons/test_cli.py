"""The `dagnet` CLI as scripts use it: exit codes, JSON shapes, the bundled examples."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from neurons.cli import app
from support.tasks import write_taskset

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
REPORT_KEYS = {
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
NODE_KEYS = {"status", "reason", "attempts", "cost_tao", "started_s", "finished_s", "output"}


@pytest.fixture
def cli():
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(app, [str(a) for a in args])

    return invoke


def _json(result) -> dict:
    return json.loads(result.stdout)


def test_seed004_example_runs_end_to_end_from_the_corpus(cli):
    result = cli("run", EXAMPLES / "seed004_ages.json", "--json")
    assert result.exit_code == 0, result.output
    report = _json(result)
    assert REPORT_KEYS <= report.keys()
    assert report["status"] == "completed"
    assert report["final_output"]["text"] == "14"
    assert report["tiers"] == [["find_emperor_wu_age", "find_caesar_age"], ["calculate_difference"]]
    for node in report["nodes"].values():
        assert NODE_KEYS <= node.keys()


def test_seed000_failed_sibling_does_not_block_a_node_that_does_not_reference_it(cli):
    report = _json(cli("run", EXAMPLES / "seed000_partial.json", "--json"))
    assert report["status"] == "partial"
    assert report["completion_ratio"] == pytest.approx(2 / 3)
    assert report["nodes"]["B"]["status"] == "failed"
    assert report["nodes"]["B"]["attempts"] == 2  # 1 + retry_count
    assert report["nodes"]["C"]["status"] == "success"
    assert report["final_output"]["text"] == "C SAW: ALPHA"
    assert report["hard_failures"] == 1
    assert report["retries"] == 1


def test_seed000_referenced_failure_blocks_its_dependent(cli):
    report = _json(cli("run", EXAMPLES / "seed000_failure.json", "--json"))
    assert report["nodes"]["step_2"]["status"] == "blocked"
    assert report["nodes"]["step_2"]["reason"] == "ancestor_failed:step_1"
    assert report["nodes"]["step_3"]["status"] == "success"
    assert report["completion_ratio"] == pytest.approx(1 / 3)
    assert report["hard_failures"] == 2


def test_plan_check_valid_plan_exits_0_with_tiers_and_critical_path(cli):
    result = cli("plan", "check", EXAMPLES / "seed000_partial.json", "--json")
    assert result.exit_code == 0
    body = _json(result)
    assert body == {"valid": True, "errors": [], "tiers": [["A", "B"], ["C"]], "critical_path_s": pytest.approx(0.06)}


def test_plan_check_names_the_cycle_on_stderr_and_exits_2(cli):
    result = cli("plan", "check", EXAMPLES / "cycle.json")
    assert result.exit_code == 2
    assert "cycle: a -> b -> a" in result.stderr


def test_run_of_a_cyclic_plan_is_invalid_and_runs_nothing(cli):
    result = cli("run", EXAMPLES / "cycle.json", "--json")
    assert result.exit_code == 2
    report = _json(result)
    assert report["status"] == "invalid"
    assert report["steps_completed"] == 0


def test_plan_check_reports_a_non_upstream_dataref_as_an_error(cli, tmp_path):
    plan = {
        "nodes": [
            {"id": "a", "subnet": "s", "action": "echo", "params": {"text": "${b.output.text}"}},
            {"id": "b", "subnet": "s", "action": "echo"},
        ]
    }
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    result = cli("plan", "check", path, "--json")
    assert result.exit_code == 2
    assert any("dataref_not_upstream:b" in e for e in _json(result)["errors"])
    report = _json(cli("run", path, "--json"))
    assert (report["nodes"]["a"]["status"], report["nodes"]["a"]["reason"]) == ("blocked", "dataref_not_upstream:b")
    assert report["nodes"]["a"]["attempts"] == 0
    assert report["nodes"]["b"]["status"] == "success"


def test_max_nodes_admits_large_local_plans(cli, tmp_path):
    nodes = [{"id": f"n{i}", "subnet": "s", "action": "echo", "params": {"text": str(i)}} for i in range(300)]
    edges = [{"from": f"n{i}", "to": f"n{i + 1}"} for i in range(299)]
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"nodes": nodes, "edges": edges}))
    assert cli("run", path, "--json").exit_code == 2  # over the default 256-node limit
    report = _json(cli("run", path, "--json", "--max-nodes", "300"))
    assert report["status"] == "completed"
    assert report["final_output"]["text"] == "299"


SCORE_KEYS = {"S", "S_success", "S_cost", "S_latency", "S_reliability", "output_quality", "completion_ratio"}


@pytest.fixture
def taskset(tmp_path):
    """A task-set file of fixed instances (seed 17) of two v2 families."""
    return write_taskset(tmp_path / "tasks.json", ["dt_weather", "rag_towns"], seed=17)


def test_a_task_from_a_task_set_file_runs_scores_and_rescores_offline_identically(cli, tmp_path, taskset):
    made = cli("plan", "make", taskset, "--task-id", "dt_weather", "--planner", "good")
    assert made.exit_code == 0, made.output
    plan_path = tmp_path / "response.json"
    plan_path.write_text(made.stdout)
    run = cli("run", plan_path, "--task", taskset, "--task-id", "dt_weather", "--json")
    assert run.exit_code == 0, run.output
    report = _json(run)
    assert SCORE_KEYS <= report["score"].keys()
    assert report["score"]["output_quality"] == 1.0
    assert (report["task_id"], report["seed"]) == ("dt_weather", 17)  # the file's instance, not a fresh one
    report_path = tmp_path / "report.json"
    report_path.write_text(run.stdout)
    rescored = cli("score", report_path, "--task", taskset, "--task-id", "dt_weather", "--json")
    assert rescored.exit_code == 0, rescored.output
    assert _json(rescored) == report["score"]


def test_a_plan_using_a_subnet_the_task_forbids_is_invalid_and_scores_zero(cli, tmp_path):
    plan = {"nodes": [{"id": "a", "subnet": "not_allowed", "action": "echo", "params": {"text": "x"}}]}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    result = cli("run", path, "--task", "dt_weather", "--seed", "1", "--json")
    assert result.exit_code == 2
    report = _json(result)
    assert report["status"] == "invalid"
    assert report["score"]["S"] == 0


def test_task_set_without_task_id_is_a_clear_error(cli, taskset):
    result = cli("run", EXAMPLES / "seed004_ages.json", "--task", taskset)
    assert result.exit_code == 2
    assert "--task-id" in result.stderr


def test_a_task_family_runs_on_a_drawn_instance_and_rescores_from_the_reports_seed(cli, tmp_path):
    made = cli("plan", "make", "dt_weather", "--planner", "good")
    assert made.exit_code == 0, made.output
    plan_path = tmp_path / "response.json"
    plan_path.write_text(made.stdout)
    run = cli("run", plan_path, "--task", "dt_weather", "--seed", "17", "--json")
    assert run.exit_code == 0, run.output
    report = _json(run)
    assert report["score"]["output_quality"] == 1.0
    assert (report["task_id"], report["seed"]) == ("dt_weather", 17)
    report_path = tmp_path / "report.json"
    report_path.write_text(run.stdout)
    assert _json(cli("score", report_path, "--task", "dt_weather", "--json")) == report["score"]
    other = _json(cli("score", report_path, "--task", "dt_weather", "--seed", "18", "--json"))
    assert other["output_quality"] < 1.0  # another instance wants another answer


def test_each_family_run_draws_a_fresh_instance_and_prints_its_seed(cli, tmp_path):
    plan_path = tmp_path / "response.json"
    plan_path.write_text(cli("plan", "make", "dt_weather", "--planner", "naive").stdout)
    seeds = {_json(cli("run", plan_path, "--task", "dt_weather", "--json"))["seed"] for _ in range(2)}
    assert len(seeds) == 2
    assert "task dt_weather, instance seed 5" in cli("run", plan_path, "--task", "dt_weather", "--seed", "5").stdout


def test_an_unknown_task_family_is_a_clear_error(cli):
    result = cli("run", EXAMPLES / "seed004_ages.json", "--task", "no_such_family")
    assert result.exit_code == 2
    assert "no task family 'no_such_family'" in result.stderr


@pytest.mark.parametrize(("level", "quiet"), [("info", True), ("warning", True), ("debug", False)])
def test_long_running_processes_keep_http_client_loggers_at_warning_unless_debug(level, quiet):
    import logging

    from neurons.commands.common import QUIET_LIBRARIES, configure_logging

    saved = {name: logging.getLogger(name).level for name in QUIET_LIBRARIES}
    try:
        for name in QUIET_LIBRARIES:
            logging.getLogger(name).setLevel(logging.NOTSET)
        configure_logging(level)
        assert {logging.getLogger(n).level for n in ("httpx", "httpcore")} == {
            logging.WARNING if quiet else logging.NOTSET
        }
    finally:
        for name, was in saved.items():
            logging.getLogger(name).setLevel(was)


def test_plan_make_sends_the_package_at_the_tier_asked(cli) -> None:
    """`plan make --tier goal` answers the goal package a validator sends: good plans it,
    naive refuses it in one line (exit 2)."""
    made = json.loads(cli("plan", "make", "rag_towns", "--tier", "goal").stdout)
    assert made["hint_tier"] == "goal" and made["steps"] == [] and made["workflow_plan"]["nodes"]
    refused = cli("plan", "make", "rag_towns", "--tier", "goal", "--planner", "naive")
    assert refused.exit_code == 2 and "full step hints only" in refused.stderr
