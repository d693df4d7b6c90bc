"""`--tier` on the commands that send a task: `dagnet tasks show`, `dagnet run --task`,
`dagnet eval` show and score the package a miner gets at that hint tier (docs/tasks.md)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from neurons.cli import app
from neurons.commands.eval import render
from neurons.evaluation import Mix, evaluate_planner, select_families
from neurons.localrun import family_task
from planners import load_planner
from tasks import family

RUNNER = CliRunner()


def _shown(*args: str) -> dict:
    done = RUNNER.invoke(app, ["tasks", "show", *args])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def test_tasks_show_prints_the_package_at_each_tier() -> None:
    package = family("dt_sales").package
    full = _shown("dt_sales")
    assert full == _shown("dt_sales", "--tier", "full")
    assert full["hint_tier"] == "full" and len(full["steps"]) == len(package.steps)
    outline = _shown("dt_sales", "--tier", "outline")
    assert outline["hint_tier"] == "outline"
    assert [(s["id"], s["action"], s.get("params", {})) for s in outline["steps"]] == [
        (f"s{i}", s.action, {}) for i, s in enumerate(package.steps, 1)
    ]
    goal = _shown("dt_sales", "--tier", "goal", "--seed", "5")
    assert goal["hint_tier"] == "goal" and goal["steps"] == [] and goal["instance_inputs"]
    assert goal["examples"] == full["examples"] and len(goal["examples"]) == 3
    refused = RUNNER.invoke(app, ["tasks", "show", "dt_sales", "--tier", "hints"])
    assert refused.exit_code == 2 and "'hints' is not one of" in refused.output


def test_run_scores_the_same_at_every_tier_and_says_which(tmp_path: Path) -> None:
    task = family_task("dt_sales", 4)
    answer = load_planner("good").plan(task.package()).answer(task.package(), miner_uid=0)
    plan = tmp_path / "plan.json"
    plan.write_text(answer.model_dump_json(by_alias=True, exclude_none=True))
    scores = {}
    for tier in ("full", "goal"):
        done = RUNNER.invoke(app, ["run", str(plan), "--task", "dt_sales", "--seed", "4", "--tier", tier, "--json"])
        assert done.exit_code in (0, 1), done.output
        scores[tier] = json.loads(done.stdout)["score"]
    assert scores["goal"] == scores["full"]  # scoring does not depend on the tier
    table = RUNNER.invoke(app, ["run", str(plan), "--task", "dt_sales", "--seed", "4", "--tier", "outline"])
    assert "instance seed 4, outline tier" in table.stdout
    alone = RUNNER.invoke(app, ["run", str(plan), "--tier", "goal"])
    assert alone.exit_code == 2 and "--tier needs --task" in alone.output


def test_eval_at_goal_scores_naive_zero_and_its_table_says_the_tier() -> None:
    result = evaluate_planner("naive", families=select_families(["dt_sales"]), seeds=[1], mix=Mix(tier="goal"))
    assert result["tier"] == "goal"
    (run,) = result["families"][0]["runs"]["naive"]
    assert run["score"]["S"] == 0 and run["reason"]
    assert "x seed 1, at the goal tier" in " ".join(line.strip() for line in render(result))
