"""`dagnet bench tasks`: every benchmark task planned by each reference strategy,
run locally exactly as `dagnet run --task` runs it, and scored.

Shows whether the task set rewards good planning: the good strategy should beat
the naive one on most tasks, for honest reasons (parallelism, cheap subnets,
retries on flaky subnets).
"""

from __future__ import annotations

import asyncio
import statistics
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from miner.planner import get_planner
from neurons.bench import DEFAULT_TASKSET
from neurons.localrun import load_taskset, run_document
from protocol.documents import PlanDocument
from protocol.task import Task


def plan_document(task: Task, strategy: str) -> PlanDocument:
    proposal = get_planner(strategy).plan(task.package())
    return PlanDocument(plan=proposal.plan, total_estimated_cost=proposal.total_estimated_cost, kind="synapse")


async def _score_task(task: Task, strategies: tuple[str, ...]) -> dict[str, Any]:
    row: dict[str, Any] = {"task_id": task.task_id, "task_type": task.task_type}
    for strategy in strategies:
        report = await run_document(plan_document(task, strategy), task=task)
        row[strategy] = {key: report["score"][key] for key in ("S", "S_success", "S_cost", "S_latency", "S_reliability")}
        row[strategy]["status"] = report["status"]
        row[strategy]["latency_s"] = report["latency_s"]
        row[strategy]["cost_tao"] = report["cost_tao"]
    return row


async def run_tasks_bench(
    taskset: Path = DEFAULT_TASKSET,
    *,
    strategies: tuple[str, ...] = ("good", "naive"),
    include_model_tasks: bool = False,
    concurrency: int = 4,
) -> dict[str, Any]:
    tasks = [t for t in load_taskset(taskset) if include_model_tasks or not t.requires_model]
    gate = asyncio.Semaphore(concurrency)

    async def one(task: Task) -> dict[str, Any]:
        async with gate:
            return await _score_task(task, strategies)

    rows = await asyncio.gather(*(one(task) for task in tasks))
    return {"taskset": str(taskset), "strategies": list(strategies), "rows": rows, "summary": _summary(rows, strategies)}


def _summary(rows: list[dict[str, Any]], strategies: tuple[str, ...]) -> dict[str, Any]:
    by_type: dict[str, dict[str, float]] = {}
    for task_type in sorted({row["task_type"] for row in rows}):
        typed = [row for row in rows if row["task_type"] == task_type]
        by_type[task_type] = {s: statistics.median(r[s]["S"] for r in typed) for s in strategies}
    summary: dict[str, Any] = {"median_S_by_type": by_type}
    summary["median_S"] = {s: statistics.median(r[s]["S"] for r in rows) for s in strategies} if rows else {}
    if len(strategies) == 2 and rows:
        first, second = strategies
        summary[f"{first}_wins"] = sum(r[first]["S"] > r[second]["S"] for r in rows)
        summary["ties"] = sum(r[first]["S"] == r[second]["S"] for r in rows)
        summary["tasks"] = len(rows)
    return summary


def render_tasks_bench(result: dict[str, Any], console: Console) -> None:
    strategies = result["strategies"]
    table = Table(title=f"benchmark tasks: {result['taskset']}")
    table.add_column("task")
    table.add_column("type")
    for strategy in strategies:
        table.add_column(f"S {strategy}", justify="right")
        table.add_column(f"status {strategy}")
    for row in result["rows"]:
        cells = [row["task_id"], row["task_type"]]
        for strategy in strategies:
            cells += [f"{row[strategy]['S']:.3f}", row[strategy]["status"]]
        table.add_row(*cells)
    console.print(table)
    summary = result["summary"]
    for task_type, medians in summary["median_S_by_type"].items():
        console.print(f"median S [{task_type}]: " + ", ".join(f"{s} {v:.3f}" for s, v in medians.items()))
    if summary.get("median_S"):
        console.print("median S [all]: " + ", ".join(f"{s} {v:.3f}" for s, v in summary["median_S"].items()))
    if "tasks" in summary:
        first = strategies[0]
        console.print(f"{first} wins {summary[f'{first}_wins']} of {summary['tasks']} tasks, ties {summary['ties']}")
