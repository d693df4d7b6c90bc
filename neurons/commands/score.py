"""``dagnet score``: re-score a saved run report offline."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from neurons.commands.common import JsonOpt, TaskIdOpt, fail, print_json
from neurons.files import InputError


def register(app: typer.Typer) -> None:
    app.command("score")(score)


def score(
    report: Path = typer.Argument(..., metavar="REPORT", help="A run report saved from `dagnet run --json`."),
    task: Path = typer.Option(
        ..., "--task", metavar="TASK", help="The task (or task set, with --task-id) to score against."
    ),
    task_id: Optional[str] = TaskIdOpt,
    seed: Optional[int] = typer.Option(
        None, "--seed", min=0, help="A task family's instance seed.  [default: the report's seed]"
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Score a saved run report against a task offline, as a validator would.

    For a task family the instance is the one the report ran on (its ``seed``)
    unless --seed names another. A report of a run against another task is refused."""
    from neurons.localrun import load_report, load_task
    from render.report import render_score
    from scoring.evaluate import score_report

    try:
        saved = load_report(report)
        if seed is None and isinstance(saved.get("seed"), int):
            seed = saved["seed"]
        loaded = load_task(task, task_id, seed)
        ran_on = saved.get("task_id")
        if isinstance(ran_on, str) and ran_on != loaded.task_id:
            fail(f"{report}: the report is a run of task {ran_on!r}, not {loaded.task_id!r} (--task)")
        result = score_report(saved, loaded).model_dump()
    except InputError as exc:
        fail(str(exc))
    if as_json:
        print_json(result)
    else:
        render_score(result, Console())
