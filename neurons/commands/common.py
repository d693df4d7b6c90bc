"""What every `dagnet` command shares: one-line errors, JSON output, common options.

Every error a user can cause ends the same way: ``error: <what and why>`` on one
line of stderr and exit code 2 — whether a command finds it (:func:`fail`) or
click does while parsing the command line (:class:`OneLineErrors`).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any, NoReturn

import typer
from pydantic import ValidationError
from typer.core import TyperGroup

from neurons.files import InputError
from neurons.localrun import load_plan, load_task
from protocol.documents import PlanDocument
from protocol.errors import format_validation_error
from protocol.task import Task

EXIT_INVALID = 2

JsonOpt = typer.Option(False, "--json", help="Print machine-readable JSON instead of a table.")
TaskIdOpt = typer.Option(None, "--task-id", help="Which task of a task-set file.  [default: none; required for a task set]")
MaxNodesOpt = typer.Option(
    None, "--max-nodes", min=1, help="Raise the node limit for large local plans.  [default: 256]"
)


def plan_argument() -> Any:
    return typer.Argument(
        ...,
        metavar="PLAN",
        help="A workflow plan, a miner's WorkflowSynapse answer, or a task-list {\"dag\": [...]} file.",
    )


def task_option(help: str) -> Any:
    return typer.Option(
        None, "--task", metavar="TASK",
        help=f"{help} TASK is a v2 task family id (dagnet bench tasks lists them) or a task file.  [default: none]",
    )


def error(message: str) -> None:
    """One unwrapped line on stderr: scripts grep these."""
    typer.echo(f"error: {_one_line(message)}", err=True)


def fail(message: str) -> NoReturn:
    """Report invalid input and exit 2."""
    error(message)
    raise typer.Exit(code=EXIT_INVALID)


def describe(exc: Exception) -> str:
    """An exception as the one line a user acts on (pydantic errors field by field)."""
    if isinstance(exc, ValidationError):
        return format_validation_error(exc)
    return str(exc)


def print_json(value: Any) -> None:
    """Strict JSON: a figure that overflowed to infinity (or NaN) prints as ``null``."""
    sys.stdout.write(json.dumps(finite(value), indent=2, ensure_ascii=False, allow_nan=False) + "\n")


def finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by ``None``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value


SeedOpt = typer.Option(
    None, "--seed", min=0, help="Draw the task family's instance from this seed.  [default: a fresh one, printed]"
)


def load_inputs(
    plan: Path, task: Path | None, task_id: str | None, seed: int | None = None
) -> tuple[PlanDocument, Task | None]:
    """The plan document and the optional task, or :func:`fail` saying why not."""
    try:
        return load_plan(plan), load_task(task, task_id, seed) if task else None
    except InputError as exc:
        fail(str(exc))


def _one_line(message: str) -> str:
    return " ".join(message.split())


class OneLineErrors(TyperGroup):
    """The root group: usage errors (unknown option, bad value, missing argument)
    become one ``error:`` line and exit 2, instead of a usage block."""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except typer.Abort:
            code = 130
        except typer.TyperException as exc:  # click's usage and parameter errors
            ctx = getattr(exc, "ctx", None)
            where = f"{ctx.command_path}: " if ctx is not None else ""
            error(f"{where}{exc.format_message()}")
            code = EXIT_INVALID
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)
