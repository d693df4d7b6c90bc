"""`dagnet run` as a function: load a plan document, execute it on the local tool
registry, optionally score it against a task, and return the run report (docs/cli.md);
and the files those commands read (a plan, a task, a task set, a saved report).

Wiring only: the documents' shapes are :mod:`protocol.documents`'s, the budget and
deadline of a run :mod:`engine.evaluate`'s, the shipped families :mod:`tasks`'s,
offline scoring :mod:`scoring.evaluate`'s.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from engine.evaluate import run_plan
from engine.executor import Event, ExecutorConfig
from engine.owned import owned_report
from engine.report import run_report
from neurons.files import InputError, read_json
from protocol.documents import PlanDocument, document_shape, load_plan_document
from protocol.errors import format_validation_error
from protocol.limits import DEFAULT_LIMITS, Limits
from protocol.task import Task, TaskSet
from protocol.validation import PlanCheck, check_plan, check_plan_for
from scoring.evaluate import saved_metrics
from subnets.owned import owned_runner
from subnets.registry import default_registry
from subnets.runner import LocalRunner
from subnets.world import ADVERTISED, World
from tasks import FamilyTasks, family
from validator.sampling import FixedTasks, TaskSource
from validator.settings import SHIPPED_TASKS


def fresh_seed() -> int:
    """A seed nobody chose: each ``dagnet run --task`` without ``--seed`` draws a new instance."""
    return secrets.randbits(63)


def load_task(path: Path, task_id: str | None = None, seed: int | None = None) -> Task:
    """A v2 task family by id (its instance drawn from ``seed``, a fresh one when
    ``None``); else a single task file, or one task of a task set chosen by ``task_id``."""
    if not path.exists() and path.name == str(path):
        return family_task(str(path), fresh_seed() if seed is None else seed)
    doc = read_json(path)
    shape = document_shape(doc)
    if shape == "taskset":
        return _select_task(_taskset(doc, path), task_id, path)
    if shape == "plan":
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


def load_task_source(path: Path) -> TaskSource:
    """``--tasks``: the shipped families for ``v2`` (a hidden instance drawn per step),
    else the fixed tasks of a task-set file."""
    if path == SHIPPED_TASKS:
        return FamilyTasks()
    doc = read_json(path)
    if document_shape(doc) != "taskset":
        raise InputError(f'{path}: not a task set (no "tasks" list)')
    return FixedTasks(_taskset(doc, path))


def load_taskset(path: Path) -> list[Task]:
    """Every task of :func:`load_task_source`, each family with its public example."""
    return list(load_task_source(path).tasks())


def _taskset(doc: dict, path: Path) -> list[Task]:
    try:
        return TaskSet.model_validate(doc).tasks
    except ValidationError as exc:
        raise InputError(f"{path}: not a task set: {format_validation_error(exc)}") from None


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
    shape = document_shape(doc)
    if shape in ("task", "taskset"):
        raise InputError(f"{path}: is a task{' set' if shape == 'taskset' else ''}, not a plan")
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
    world: World = ADVERTISED,
) -> dict[str, Any]:
    """Execute ``document`` locally and return the run report.

    With a task, the plan runs on the task's drawn instance exactly as a validator
    runs it (:func:`engine.owned.owned_report`: the reference tools playing the
    task's subnets, on simulated time) and the report gains ``score``,
    ``task_id`` and ``seed``; without one, :func:`engine.evaluate.run_plan` runs it.
    ``on_event`` receives every lifecycle transition as it happens (see :func:`execute`).
    ``inputs`` bind the plan's ``${input.*}`` refs when there is no task (with a task,
    its instance binds them). ``world`` is what the task's subnets play (:mod:`subnets.world`).
    """
    if task is not None and inputs is not None:
        raise ValueError("inputs come from the task's instance: give a task or inputs, not both")
    check = check_document(document, task=task, limits=limits)
    if task is None:
        execution = await run_plan(
            document.plan,
            check,
            LocalRunner(default_registry()),
            total_estimated_cost=document.total_estimated_cost,
            config=config,
            limits=limits,
            on_event=on_event,
            inputs=inputs,
        )
        return run_report(execution)
    return await asyncio.to_thread(
        owned_report,
        document.plan,
        check,
        task,
        owned_runner(task, world=world),
        total_estimated_cost=document.total_estimated_cost,
        config=config,
        limits=limits,
        on_event=on_event,
    )


def load_report(path: Path) -> dict[str, Any]:
    """A run report saved by ``dagnet run --json``, checked for the fields scoring reads."""
    report = read_json(path)
    try:
        saved_metrics(report)
    except ValueError as exc:
        raise InputError(f"{path}: {exc}") from None
    return report
