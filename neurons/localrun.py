"""`dagnet run` as a function: load a plan document, execute it on the local tool
registry, optionally score it against a task, and return the run report (docs/cli.md).

Wiring only: the executor, the tools and the scorers do the work.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from benchmarks import VERSION, FamilyTasks, family
from miner.tools.llm import LLMConfig
from miner.tools.registry import default_registry
from miner.tools.runner import LocalRunner
from neurons.files import InputError, read_json
from protocol.documents import PlanDocument, load_plan_document
from protocol.errors import format_validation_error
from protocol.limits import DEFAULT_LIMITS, Limits
from protocol.metrics import RunMetrics
from protocol.task import Task, TaskSet
from protocol.validation import PlanCheck, check_plan, check_plan_for
from scoring.evaluate import invalid_score, score_run
from engine.evaluate import DEADLINE_FACTOR, budget_ceiling
from engine.owned import evaluate_owned
from engine.executor import Event, ExecutorConfig, execute
from engine.report import run_report

DEFAULT_MAX_LATENCY_S = 60.0


def owned_runner(task: Task, *, llm: LLMConfig | None = None) -> LocalRunner:
    """The runner that plays ``task``'s partner subnets with the reference tools, each
    as its profile says: what a validator's owned execution runs a plan on. ``llm``
    answers the ``llm`` action (an operator's openai adapter); a task without partner
    subnets gets the bare tools, with no profile's price, delay or failure."""
    return LocalRunner(default_registry(llm=llm), subnets=task.available_tools or None)


def fresh_seed() -> int:
    """A seed nobody chose: each ``dagnet run --task`` without ``--seed`` draws a new instance."""
    return secrets.randbits(63)


def load_task(path: Path, task_id: str | None = None, seed: int | None = None) -> Task:
    """A v2 task family by id (its instance drawn from ``seed``, a fresh one when
    ``None``); else a single task file, or one task of a task set chosen by ``task_id``."""
    if not path.exists() and path.name == str(path):
        return family_task(str(path), fresh_seed() if seed is None else seed)
    doc = read_json(path)
    if _is_taskset(doc):
        return _select_task(_taskset(doc, path), task_id, path)
    if _is_plan(doc):
        raise InputError(f"{path}: is a workflow plan, not a task")
    try:
        return Task.model_validate(doc)
    except ValidationError as exc:
        raise InputError(f"{path}: not a task: {format_validation_error(exc)}") from None


def family_task(task_id: str, seed: int) -> Task:
    """The instance of v2 family ``task_id`` drawn from ``seed``."""
    try:
        found = family(task_id)
    except KeyError as exc:
        raise InputError(str(exc).strip("'\"")) from None
    return found.task(found.instance(seed))


SHIPPED_TASKS = Path(VERSION)
"""``--tasks v2``: the shipped task families (each shown with its public example)."""


def load_taskset(path: Path) -> list[Task]:
    """Every task of a task-set file, or of the shipped families for ``v2``."""
    if path == SHIPPED_TASKS:
        return list(FamilyTasks().tasks())
    doc = read_json(path)
    if not _is_taskset(doc):
        raise InputError(f"{path}: not a task set (no \"tasks\" list)")
    return _taskset(doc, path)


def _taskset(doc: dict, path: Path) -> list[Task]:
    try:
        return TaskSet.model_validate(doc).tasks
    except ValidationError as exc:
        raise InputError(f"{path}: not a task set: {format_validation_error(exc)}") from None


def _is_taskset(doc: Any) -> bool:
    return isinstance(doc, dict) and "tasks" in doc


def _is_plan(doc: Any) -> bool:
    return isinstance(doc, dict) and any(key in doc for key in ("nodes", "workflow_plan", "dag"))


def _is_task(doc: Any) -> bool:
    return isinstance(doc, dict) and "task_id" in doc and not _is_plan(doc)


def _select_task(tasks: list[Task], task_id: str | None, path: Path) -> Task:
    if task_id is None:
        raise InputError(f"{path} is a task set: choose a task with --task-id")
    for task in tasks:
        if task.task_id == task_id:
            return task
    raise InputError(f"{path}: no task with id {task_id!r}")


def load_plan(path: Path) -> PlanDocument:
    """A plan in any shape :func:`load_plan_document` accepts."""
    doc = read_json(path)
    if _is_taskset(doc) or _is_task(doc):
        raise InputError(f"{path}: is a task{' set' if _is_taskset(doc) else ''}, not a plan")
    try:
        return load_plan_document(doc)
    except ValueError as exc:
        raise InputError(f"{path}: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise InputError(f"{path}: plan nested too deeply") from None


def limits_for(max_nodes: int | None) -> Limits:
    if max_nodes is None:
        return DEFAULT_LIMITS
    return replace(DEFAULT_LIMITS, max_nodes=max_nodes, max_edges=max(DEFAULT_LIMITS.max_edges, 16 * max_nodes))


def check_document(document: PlanDocument, *, task: Task | None, limits: Limits) -> PlanCheck:
    if task is None:
        return check_plan(document.plan, limits=limits)
    return check_plan_for(document.plan, task, limits=limits)


async def run_document(
    document: PlanDocument,
    *,
    task: Task | None = None,
    limits: Limits = DEFAULT_LIMITS,
    config: ExecutorConfig = ExecutorConfig(),
    on_event: Callable[[Event], None] | None = None,
    inputs: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Execute ``document`` locally and return the run report.

    With a task, the plan runs on the task's drawn instance exactly as a validator
    runs it (:func:`engine.owned.evaluate_owned`: the reference tools playing the
    task's subnets, on simulated time) and the report gains ``score``,
    ``task_id`` and ``seed``. Without one, its ceiling is 1.5 × its declared estimate.
    ``on_event`` receives every lifecycle transition as it happens (see :func:`execute`).
    ``inputs`` bind the plan's ``${input.*}`` refs when there is no task (with a task,
    its instance binds them).
    """
    if task is not None and inputs is not None:
        raise ValueError("inputs come from the task's instance: give a task or inputs, not both")
    check = check_document(document, task=task, limits=limits)
    estimate = document.total_estimated_cost
    if estimate is None:
        estimate = document.plan.estimated_cost()
    if task is None:
        execution = await execute(
            document.plan, LocalRunner(default_registry()), task_id="local",
            budget_ceiling=budget_ceiling(None, estimate),
            deadline_s=DEADLINE_FACTOR * DEFAULT_MAX_LATENCY_S, config=config, check=check, limits=limits,
            on_event=on_event, inputs=inputs,
        )
        return run_report(execution)
    evaluation = await asyncio.to_thread(
        evaluate_owned, document.plan, check, task, owned_runner(task),
        total_estimated_cost=estimate, config=config, limits=limits, on_event=on_event,
    )
    report = run_report(evaluation.execution, score=evaluation.score.model_dump())
    return {**report, "task_id": task.task_id, "seed": task.seed}


_METRIC_FIELDS = {
    "completion_ratio": float, "latency_s": float, "cost_tao": float,
    "retries": int, "unplanned_retries": int, "timeouts": int, "hard_failures": int,
}


def load_report(path: Path) -> dict[str, Any]:
    """A run report saved by ``dagnet run --json``, checked for the fields scoring reads."""
    report = read_json(path)
    try:
        metrics_from_report(report)
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from None
    return report


def metrics_from_report(report: Any) -> RunMetrics:
    """Rebuild the metrics of a saved run report (for offline scoring)."""
    if not isinstance(report, dict):
        raise InputError(f"not a run report: expected a JSON object, got {type(report).__name__}")
    values = {}
    for field, kind in _METRIC_FIELDS.items():
        if field not in report:
            raise InputError(f"not a run report: missing {field!r}")
        try:
            values[field] = kind(report[field])
        except (TypeError, ValueError):
            raise InputError(f"not a run report: {field!r} is not a number") from None
    return RunMetrics(**values)


def score_report(report: dict[str, Any], task: Task) -> dict[str, Any]:
    """Score a saved run report against ``task`` exactly as ``dagnet run --task`` would."""
    metrics = metrics_from_report(report)
    if report.get("status") == "invalid":
        return invalid_score("invalid plan").model_dump()
    return score_run(task, metrics=metrics, final_output=report.get("final_output")).model_dump()
