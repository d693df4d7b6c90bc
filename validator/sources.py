"""What a validator sends: the task sources it draws from and the gate that keeps code out.

A validator sends a code task only once its start-up sandbox check has passed
(:class:`CodeGate`); the shipped families are a fixed source, and the drawn families
(``tasks.drawn``) are drawn per tempo from the validator's secret, each checked first by
running the reference's plan on it (:func:`validator.reference.reference_solves`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path

from protocol.task import Task
from sandbox import PRIVATE_ISOLATION, SandboxLimits, SandboxUnavailable, isolation_available, run_python
from tasks import Family
from tasks.drawn import TYPES as DRAWN_TYPES
from tasks.drawn import drawn_families
from validator.loop import TaskSource
from validator.reference import reference_solves
from validator.sampling import DrawnFamilies
from validator.settings import SHIPPED_TASKS

log = logging.getLogger("dagnet.validator")

SANDBOX_WARNING = "sandbox unavailable: no code task is sent, miners are scored on the rest — see docs/sandbox.md"


def sandbox_problem() -> str | None:
    """Why this machine cannot judge code (``None``: it can): the isolation the code
    scorer requires, then one tiny program run through it. Blocking: seconds at most."""
    isolation = isolation_available()
    if isolation != PRIVATE_ISOLATION:
        return f"isolation here is {isolation}, and code is judged only under {PRIVATE_ISOLATION}"
    try:
        run = run_python(
            {"check.py": "print(6 * 7)"}, ["check.py"], limits=SandboxLimits(cpu_seconds=5, wall_seconds=15)
        )
    except (SandboxUnavailable, OSError) as exc:
        return f"a test run could not start: {exc}"
    if run.returncode != 0 or run.stdout.strip() != "42":
        return f"a test run exited {run.returncode}: {run.stderr.strip()[-300:]}"
    return None


def start_sandbox_check() -> asyncio.Task[str | None]:
    """:func:`sandbox_problem` in a worker thread, so start-up is not held up; logs one
    warning when code cannot be judged. Call from the running loop."""

    async def check() -> str | None:
        try:
            problem = await asyncio.to_thread(sandbox_problem)
        except Exception as exc:  # a broken check is itself a sandbox that cannot be trusted
            problem = f"the check failed: {exc!r}"
        if problem is not None:
            log.warning("%s (%s)", SANDBOX_WARNING, problem)
        return problem

    return asyncio.get_running_loop().create_task(check(), name="sandbox-check")


class CodeGate:
    """Whether this validator sends code tasks: only once its start-up sandbox check
    (:func:`start_sandbox_check`) has passed. A validator that cannot judge code sends no
    code task, curated or drawn, and scores miners on the rest, rather than failing every
    step that drew one; ``/health`` names the sandbox meanwhile."""

    def __init__(self, check: asyncio.Future[str | None]) -> None:
        self._check = check

    def judges_code(self) -> bool:
        check = self._check
        return check.done() and not check.cancelled() and check.result() is None

    def types(self) -> tuple[str, ...]:
        """The task types families are drawn from now."""
        return DRAWN_TYPES if self.judges_code() else tuple(t for t in DRAWN_TYPES if t != "code")


class GatedTasks:
    """``source`` less its code tasks while ``gate`` keeps code out."""

    def __init__(self, source: TaskSource, gate: CodeGate) -> None:
        self._source, self._gate = source, gate

    def tasks(self) -> Sequence[Task]:
        judges_code = self._gate.judges_code()
        return [task for task in self._source.tasks() if judges_code or task.task_type != "code"]

    def instance(self, task: Task, seed: int) -> Task:
        return self._source.instance(task, seed)


class DrawnTasks:
    """Families drawn for one tempo as a task source: each shown with its public example,
    an instance drawn by its own generator."""

    def __init__(self, families: Sequence[Family]) -> None:
        self._families = {f.task_id: f for f in families}

    def tasks(self) -> tuple[Task, ...]:
        return tuple(f.task(f.example()) for f in self._families.values())

    def instance(self, task: Task, seed: int) -> Task:
        found = self._families[task.task_id]
        return found.task(found.instance(seed))


def drawn_source(tasks: Path, per_tempo: int, gate: CodeGate | None = None) -> DrawnFamilies | None:
    """The families a validator draws per tempo besides the shipped ones (``tasks.drawn``,
    each checked by running its reference plan, :func:`reference_failure`), of the types
    ``gate`` lets through (every type without one); ``None`` for a task-set file or ``per_tempo`` 0."""
    if tasks != SHIPPED_TASKS or per_tempo <= 0:
        return None
    return lambda secret, tempo: DrawnTasks(
        drawn_families(
            secret, tempo, per_tempo, verify=reference_solves, types=DRAWN_TYPES if gate is None else gate.types()
        )
    )
