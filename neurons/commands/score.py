"""``dagnet score``: re-score a saved run report offline."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from neurons.commands.common import JsonOpt, TaskIdOpt, fail, print_json
from neurons.files import InputError
from neurons.localrun import load_report, load_task, score_report


def register(app: typer.Typer) -> None:
    app.command("score")(score)


def score(
    report: Path = typer.Argument(..., metavar="REPORT", help="A run report saved from `dagnet run --json`."),
    task: Path = typer.Option(..., "--task", metavar="TASK", help="The task (or task set, with --task-id) to score against."),
    task_id: Optional[str] = TaskIdOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Score a saved run report against a task offline, as a validator would."""
    from validator.report import render_score

    try:
        result = score_report(load_report(report), load_task(task, task_id))
    except InputError as exc:
        fail(str(exc))
    if as_json:
        print_json(result)
    else:
        render_score(result, Console())
