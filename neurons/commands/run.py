"""``dagnet run``: execute a plan on the local tool registry."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any, Optional, TextIO

import typer
from rich.console import Console

from neurons.commands.common import (
    EXIT_INVALID,
    JsonOpt,
    MaxNodesOpt,
    SecretOpt,
    SeedOpt,
    TaskIdOpt,
    TierOpt,
    WorldOpt,
    error,
    fail,
    load_inputs,
    needs,
    plan_argument,
    print_json,
    task_option,
)
from neurons.files import InputError, read_json
from protocol import strictjson
from protocol.hints import HintTier
from protocol.outcomes import RunStatus
from protocol.task import at_tier

EXIT_NOT_COMPLETED = 1


def register(app: typer.Typer) -> None:
    app.command("run")(run)


def run(
    plan: Path = plan_argument(),
    task: Optional[Path] = task_option(
        "Run against this task (or task set, with --task-id): its prices, delays and limits, and add a score."
    ),
    task_id: Optional[str] = TaskIdOpt,
    seed: Optional[int] = SeedOpt,
    tier: HintTier = TierOpt,
    world: str = WorldOpt,
    secret: int = SecretOpt,
    as_json: bool = JsonOpt,
    max_nodes: Optional[int] = MaxNodesOpt,
    events: bool = typer.Option(
        False,
        "--events",
        help="Stream every lifecycle transition as a JSON line while the plan runs; the last line is "
        '{"event": "report", "report": {...}}.',
    ),
    inputs: Optional[str] = typer.Option(
        None,
        "--inputs",
        metavar="JSON|FILE",
        help="Bind the plan's ${input.*} refs without a task: a JSON object, or a file holding one.  [default: none]",
    ),
    html_out: Optional[Path] = typer.Option(
        None,
        "--html",
        metavar="OUT.html",
        help="Also write the run as one self-contained HTML page: DAG, timeline, critical path, score.  [default: none]",
    ),
) -> None:
    """Execute a plan on the local tool registry and print the run report.

    With a task family, the plan runs on a hidden instance drawn afresh each run (its
    seed is printed; --seed replays it) and is scored as a validator scores it; --tier
    sends it at that hint tier (the score does not depend on it); --world TEMPO plays the
    task's subnets as tempo TEMPO's hidden world (drawn from --secret) says. Exit 0 when every node succeeded (status completed), 1 when the plan ran but did
    not complete (partial, budget_abort), 2 when the input is invalid.
    """
    from engine.trace import RunTrace
    from neurons.localrun import limits_for, run_document
    from render.report import render_report
    from render.runpage import render_run_page
    from subnets.world import ADVERTISED, world_named

    needs("--tier", None if tier == "full" else tier, "--task", task)
    needs("--world", None if world == "advertised" else world, "--task", task)
    document, loaded_task = load_inputs(plan, task, task_id, seed)
    played = ADVERTISED
    if loaded_task is not None:
        loaded_task = at_tier(loaded_task, tier)
        try:
            played = world_named(world, secret, loaded_task.available_tools)
        except ValueError as exc:
            fail(str(exc))
    bound = None if inputs is None else _inputs(inputs, loaded_task is not None)
    page = _open_for_writing(html_out) if html_out is not None else None
    # Lifecycle events are made only when something reads them (--events, --html): a plain
    # run takes the executor's quiet path, which builds no Event per transition.
    trace = RunTrace(_print_json_line if events else None) if events or page is not None else None
    report = asyncio.run(
        run_document(
            document,
            task=loaded_task,
            limits=limits_for(max_nodes),
            on_event=trace,
            inputs=bound,
            world=played,
        )
    )
    if page is not None and trace is not None:
        with page:
            page.write(render_run_page(document.plan, report, trace.events, title=f"dagnet run {plan.name}"))
    if events:
        _print_json_line({"event": "report", "report": report})
    elif as_json:
        print_json(report)
    else:
        console = Console()
        if loaded_task is not None and loaded_task.seed is not None:
            console.print(f"task {loaded_task.task_id}, instance seed {loaded_task.seed}, {loaded_task.hint_tier} tier")
        render_report(report, console)
    for finding in report.get("errors", []):
        error(finding)
    raise typer.Exit(code=exit_code(report["status"]))


def exit_code(status: str) -> int:
    """0 completed, 1 ran but did not complete, 2 invalid."""
    if status == RunStatus.INVALID:
        return EXIT_INVALID
    return 0 if status == RunStatus.COMPLETED else EXIT_NOT_COMPLETED


def _inputs(given: str, with_task: bool) -> dict[str, Any]:
    """``--inputs``: a JSON object written out, or the path of a file holding one."""
    if with_task:
        fail("--inputs: a task's instance binds the inputs; give --task or --inputs, not both")
    try:
        value = strictjson.loads(given) if given.lstrip()[:1] in ("{", "[") else read_json(Path(given))
    except InputError as exc:
        fail(f"--inputs {exc}")
    except ValueError as exc:
        fail(f"--inputs: not valid JSON: {exc}")
    if not isinstance(value, dict):
        fail(f"--inputs: expected a JSON object, got {type(value).__name__}")
    return value


def _print_json_line(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _open_for_writing(path: Path) -> TextIO:
    """Open an output file before the run, so a bad path fails before anything executes."""
    try:
        return path.open("w", encoding="utf-8")
    except OSError as exc:
        fail(f"{path}: cannot write: {exc.strerror or exc}")
