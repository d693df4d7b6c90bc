"""The `dagnet` command line. Stable: scripts depend on its flags, output and exit codes.

Exit codes: 0 success; 2 invalid input (a plan that fails validation, a file that
cannot be read). The reason goes to stderr.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console

from protocol.documents import PlanDocument
from protocol.task import Task
from neurons.localrun import InputError, check_document, limits_for, load_plan, load_task, read_json, run_document, score_report

app = typer.Typer(help="dagnet: workflow-orchestration subnet tools.", no_args_is_help=True, add_completion=False)
plan_app = typer.Typer(help="Inspect workflow plans.", no_args_is_help=True)
bench_app = typer.Typer(help="Benchmarks that print ratios measured in one run.", no_args_is_help=True)
app.add_typer(plan_app, name="plan")
app.add_typer(bench_app, name="bench")

_out = Console()

PlanArg = typer.Argument(..., help="A workflow plan, a miner's WorkflowSynapse response, or a task-list {'dag': [...]} file.")
JsonOpt = typer.Option(False, "--json", help="Print machine-readable JSON.")
MaxNodesOpt = typer.Option(None, "--max-nodes", min=1, help="Raise the node limit for large local plans.")
TaskOpt = typer.Option(None, "--task", help="A task (or task set with --task-id) to score against.")
TaskIdOpt = typer.Option(None, "--task-id", help="Which task of a task-set file.")


def _error(message: str) -> None:
    """One unwrapped line on stderr: scripts grep these."""
    typer.echo(f"error: {message}", err=True)


def _fail(message: str) -> None:
    _error(message)
    raise typer.Exit(code=2)


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def _load(plan: Path, task: Path | None, task_id: str | None) -> tuple[PlanDocument, Task | None]:
    try:
        return load_plan(plan), load_task(task, task_id) if task else None
    except InputError as exc:
        _fail(str(exc))
        raise  # unreachable: _fail exits


@plan_app.command("check")
def plan_check(
    plan: Path = PlanArg,
    as_json: bool = JsonOpt,
    max_nodes: Optional[int] = MaxNodesOpt,
    task: Optional[Path] = TaskOpt,
    task_id: Optional[str] = TaskIdOpt,
) -> None:
    """Validate a plan statically. Exit 0 when valid, 2 when invalid (reasons on stderr)."""
    document, loaded_task = _load(plan, task, task_id)
    check = check_document(document, task=loaded_task, limits=limits_for(max_nodes))
    errors = check.errors + [f"{node}: {reason}" for node, reason in check.node_errors.items()]
    if as_json:
        _print_json({"valid": check.valid, "errors": errors, "tiers": check.tiers, "critical_path_s": check.critical_path_s})
    else:
        verdict = "[green]valid[/green]" if check.valid else "[red]invalid[/red]"
        _out.print(f"{plan}: {verdict} — {len(document.plan.nodes)} nodes, {len(check.tiers)} tiers, critical path {check.critical_path_s:.3f}s")
    for error in errors:
        _error(error)
    if not check.valid:
        raise typer.Exit(code=2)


@plan_app.command("make")
def plan_make(
    task: Path = typer.Argument(..., help="A task, or a task set with --task-id."),
    task_id: Optional[str] = TaskIdOpt,
    strategy: str = typer.Option("good", "--strategy", help="Reference planner strategy: good | naive."),
) -> None:
    """Plan a task with a reference strategy and print the miner's WorkflowSynapse response."""
    from miner.planner import PlanningError, get_planner

    try:
        loaded = load_task(task, task_id)
        proposal = get_planner(strategy).plan(loaded.package())
    except (InputError, KeyError, PlanningError) as exc:
        _fail(str(exc).strip("'\""))
    answer = proposal.answer(loaded.package(), miner_uid=0)
    _print_json(answer.model_dump(mode="json", by_alias=True, exclude_none=True))


@app.command("run")
def run(
    plan: Path = PlanArg,
    task: Optional[Path] = TaskOpt,
    task_id: Optional[str] = TaskIdOpt,
    as_json: bool = JsonOpt,
    max_nodes: Optional[int] = MaxNodesOpt,
) -> None:
    """Execute a plan on the local tool registry and print the run report."""
    from validator.report import render_report

    document, loaded_task = _load(plan, task, task_id)
    report = asyncio.run(run_document(document, task=loaded_task, limits=limits_for(max_nodes)))
    if as_json:
        _print_json(report)
    else:
        render_report(report, _out)
    if report["status"] == "invalid":
        for error in report.get("errors", []):
            _error(error)
        raise typer.Exit(code=2)


@app.command("score")
def score(
    report: Path = typer.Argument(..., help="A run report saved from `dagnet run --json`."),
    task: Path = typer.Option(..., "--task", help="The task (or task set with --task-id)."),
    task_id: Optional[str] = TaskIdOpt,
) -> None:
    """Score a saved run report against a task offline, as a validator would."""
    try:
        result = score_report(read_json(report), load_task(task, task_id))
    except InputError as exc:
        _fail(str(exc))
    _print_json(result)


@bench_app.command("executor")
def bench_executor(
    as_json: bool = JsonOpt,
    repeats: int = typer.Option(3, "--repeats", min=1),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Makespan ÷ critical path on random DAGs (vs a tier-barrier schedule) and scheduling throughput."""
    from neurons.bench_executor import render_executor_bench, run_executor_bench

    result = run_executor_bench(seed=seed, repeats=repeats)
    _print_json(result) if as_json else render_executor_bench(result, _out)


@bench_app.command("network")
def bench_network(
    as_json: bool = JsonOpt,
    miners: int = typer.Option(256, "--miners", min=1, help="Miners in the validation step (256: the largest subnet)."),
) -> None:
    """Signed request throughput of one miner process, and one validation step against 256 miners."""
    from neurons.bench_network import render_network_bench, run_network_bench

    result = run_network_bench(miners=miners)
    _print_json(result) if as_json else render_network_bench(result, _out)


@bench_app.command("tasks")
def bench_tasks(
    taskset: Optional[Path] = typer.Option(None, "--set", help="Task set (default benchmarks/v1.json)."),
    as_json: bool = JsonOpt,
    concurrency: int = typer.Option(4, "--concurrency", min=1),
) -> None:
    """Score the good and the naive reference strategy on every benchmark task."""
    from neurons.bench_tasks import DEFAULT_TASKSET, render_tasks_bench, run_tasks_bench

    result = asyncio.run(run_tasks_bench(taskset or DEFAULT_TASKSET, concurrency=concurrency))
    _print_json(result) if as_json else render_tasks_bench(result, _out)


def _mount_miner() -> None:
    from neurons.miner import miner

    app.command("miner", help="Run a miner: the signed FastAPI app with a reference planner and tools.")(miner)


def _mount_validator() -> None:
    from neurons.validator import validator

    app.command("validator", help="Run a validator: steps, state, weights; /health and /metrics.")(validator)


_mount_miner()
_mount_validator()


if __name__ == "__main__":  # pragma: no cover
    app()
