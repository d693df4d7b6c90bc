"""``dagnet run``: execute a plan on the local tool registry."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from neurons.commands.common import (
    EXIT_INVALID, JsonOpt, MaxNodesOpt, TaskIdOpt, error, load_inputs, plan_argument, print_json, task_option,
)
from neurons.localrun import limits_for, run_document

EXIT_NOT_COMPLETED = 1


def register(app: typer.Typer) -> None:
    app.command("run")(run)


def run(
    plan: Path = plan_argument(),
    task: Optional[Path] = task_option(
        "Run against this task (or task set, with --task-id): its prices, delays and limits, and add a score."
    ),
    task_id: Optional[str] = TaskIdOpt,
    as_json: bool = JsonOpt,
    max_nodes: Optional[int] = MaxNodesOpt,
) -> None:
    """Execute a plan on the local tool registry and print the run report.

    Exit 0 when every node succeeded (status completed), 1 when the plan ran but did
    not complete (partial, budget_abort), 2 when the input is invalid.
    """
    from validator.report import render_report

    document, loaded_task = load_inputs(plan, task, task_id)
    report = asyncio.run(run_document(document, task=loaded_task, limits=limits_for(max_nodes)))
    if as_json:
        print_json(report)
    else:
        render_report(report, Console())
    for finding in report.get("errors", []):
        error(finding)
    raise typer.Exit(code=exit_code(report["status"]))


def exit_code(status: str) -> int:
    """0 completed, 1 ran but did not complete, 2 invalid."""
    if status == "invalid":
        return EXIT_INVALID
    return 0 if status == "completed" else EXIT_NOT_COMPLETED
