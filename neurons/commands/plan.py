"""``dagnet plan check`` and ``dagnet plan make``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from neurons.commands.common import (
    JsonOpt,
    MaxNodesOpt,
    TaskIdOpt,
    TierOpt,
    error,
    fail,
    load_inputs,
    plan_argument,
    print_json,
    task_option,
)
from neurons.files import InputError
from protocol.frames import FrameScopes
from protocol.hints import HintTier
from protocol.task import at_tier

plan_app = typer.Typer(help="Inspect and make workflow plans.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(plan_app, name="plan")


@plan_app.command("check")
def plan_check(
    plan: Path = plan_argument(),
    as_json: bool = JsonOpt,
    max_nodes: Optional[int] = MaxNodesOpt,
    task: Optional[Path] = task_option(
        "Also check the plan against this task (or task set, with --task-id): its allowed subnets, "
        "the actions each subnet offers, and its declared inputs."
    ),
    task_id: Optional[str] = TaskIdOpt,
) -> None:
    """Validate a plan statically. Exit 0 when valid, 2 when invalid (each finding on stderr)."""
    from neurons.localrun import check_document, limits_for

    document, loaded_task = load_inputs(plan, task, task_id)
    check = check_document(document, task=loaded_task, limits=limits_for(max_nodes))
    errors = check.errors + [f"{node}: {reason}" for node, reason in check.node_errors.items()]
    frames = check.frames
    if as_json:
        body = {"valid": check.valid, "errors": errors, "tiers": check.tiers, "critical_path_s": check.critical_path_s}
        if frames.members:  # a plan with generators
            body["frames"] = {"per_frame": frames.members, "gathers": frames.gathered}
        print_json(body)
    else:
        verdict = "[green]valid[/green]" if check.valid else "[red]invalid[/red]"
        console = Console()
        console.print(
            f"{plan}: {verdict} — {len(document.plan.nodes)} nodes, {len(check.tiers)} tiers, "
            f"critical path {check.critical_path_s:.3f}s"
        )
        for line in _frame_lines(frames):
            console.print(line, highlight=False, markup=False)
    for finding in errors:
        error(finding)
    if not check.valid:
        raise typer.Exit(code=2)


def _frame_lines(frames: FrameScopes) -> list[str]:
    """One line per generator: what runs once per frame, what gathers its frames."""
    lines = []
    for generator, members in frames.members.items():
        gathers = [node for node, source in frames.gathered.items() if source == generator]
        lines.append(
            f"  generator {generator}: per frame {', '.join(members) or 'nothing'}; "
            f"gathered by {', '.join(gathers) or 'nothing'}"
        )
    return lines


@plan_app.command("make")
def plan_make(
    task: Path = typer.Argument(..., metavar="TASK", help="A task, or a task set with --task-id."),
    task_id: Optional[str] = TaskIdOpt,
    planner: str = typer.Option(
        "good",
        "--planner",
        help="The planner: good | naive | invalid | precompute, a dagnet.planners entry point, or package.module:attr.",
    ),
    tier: HintTier = TierOpt,
) -> None:
    """Plan a task with a planner and print the miner's WorkflowSynapse answer.

    The planner runs as the miner runs it (its planning deadline, a bare plan or a
    proposal accepted); --tier sends the package at that hint tier, as validators do.
    """
    from neurons.localrun import load_task
    from planners import PlannerFailure, PlannerLoadError, answer_for, load_planner, run_planner

    try:
        loaded = at_tier(load_task(task, task_id), tier)
        package = loaded.package()
        answer = answer_for(asyncio.run(run_planner(load_planner(planner), package)), package, miner_uid=0)
    except (InputError, KeyError, PlannerLoadError) as exc:
        fail(str(exc).strip("'\""))
    except PlannerFailure as exc:
        fail(f"planner {planner!r}: {exc}")
    print_json(answer.model_dump(mode="json", by_alias=True, exclude_none=True))
