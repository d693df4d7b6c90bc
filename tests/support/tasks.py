"""The shipped v2 families as tests use them: a validator's task source over a few of
them, the subnet profiles a stand-in tool provider plays, a task-set file of drawn instances."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from protocol.task import Task, TaskSet
from tasks import VERSION, FamilyTasks, family


class SomeFamilies(FamilyTasks):
    """The validator's task source (hidden instances drawn per step) over the named families only."""

    def __init__(self, *task_ids: str) -> None:
        self.task_ids = task_ids

    def tasks(self) -> tuple[Task, ...]:
        found = tuple(task for task in super().tasks() if task.task_id in self.task_ids)
        assert {task.task_id for task in found} == set(self.task_ids), "not a shipped family"
        return found


def provider_profiles(tasks: Iterable[Task]) -> dict[str, dict[str, Any]]:
    """``MinerSettings.provider_tasks`` (``dagnet miner --provider-tasks``): each task's subnets by task id."""
    return {task.task_id: task.available_tools for task in tasks}


def write_taskset(path: Path, task_ids: Iterable[str], seed: int) -> Path:
    """A task-set file (``--task FILE --task-id ID``, ``dagnet validator --tasks FILE``)
    holding the instance of ``seed`` of each named family: tasks whose inputs are fixed."""
    tasks = [found.task(found.instance(seed)) for found in map(family, task_ids)]
    path.write_text(TaskSet(version=VERSION, tasks=tasks).model_dump_json())
    return path
