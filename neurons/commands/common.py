"""What every `dagnet` command shares: one-line errors, JSON output, common options.

Every error a user can cause ends the same way: ``error: <what and why>`` on one
line of stderr and exit code 2 — whether a command finds it (:func:`fail`) or
click does while parsing the command line (:class:`OneLineErrors`). A group
given no command (``dagnet``, ``dagnet plan``) is not an error: it prints its
help, readable, and exits 0.
"""

from __future__ import annotations

import json
import logging
import math
import re
import sys
from pathlib import Path
from typing import Any, NoReturn

import typer
from pydantic import ValidationError
from typer._click.exceptions import NoArgsIsHelpError, NoSuchOption  # typer vendors click; these are its exceptions
from typer.core import TyperGroup

from neurons.files import InputError
from protocol.documents import PlanDocument
from protocol.errors import format_validation_error
from protocol.task import Task

EXIT_INVALID = 2

JsonOpt = typer.Option(False, "--json", help="Print machine-readable JSON instead of a table.")
TaskIdOpt = typer.Option(
    None, "--task-id", help="Which task of a task-set file.  [default: none; required for a task set]"
)
TierOpt = typer.Option(
    "full",
    "--tier",
    help="The hint tier the task is sent at: full (the step hints), outline (their actions only) or goal (no "
    "steps: the description, inputs and public examples); see docs/tasks.md.",
)
MaxNodesOpt = typer.Option(
    None, "--max-nodes", min=1, help="Raise the node limit for large local plans.  [default: 256]"
)


def plan_argument() -> Any:
    return typer.Argument(
        ...,
        metavar="PLAN",
        help='A workflow plan, a miner\'s WorkflowSynapse answer, or a task-list {"dag": [...]} file.',
    )


def task_option(help: str) -> Any:
    return typer.Option(
        None,
        "--task",
        metavar="TASK",
        help=f"{help} TASK is a v2 task family id (dagnet tasks list lists them) or a task file.  [default: none]",
    )


def error(message: str) -> None:
    """One unwrapped line on stderr: scripts grep these."""
    typer.echo(f"error: {_one_line(message)}", err=True)


def fail(message: str) -> NoReturn:
    """Report invalid input and exit 2."""
    error(message)
    raise typer.Exit(code=EXIT_INVALID)


def needs(option: str, value: Any, required: str, present: Any) -> None:
    """:func:`fail` when ``option`` was given (``value`` is not None) but the option it
    works with, ``required``, was not: an option that would silently do nothing."""
    if value is not None and present is None:
        fail(f"{option} needs {required}")


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


WorldOpt = typer.Option(
    "advertised",
    "--world",
    metavar="advertised|TEMPO",
    help="The world the task's subnets play: their advertised profile, or tempo TEMPO's hidden world drawn "
    "from --secret (docs/tasks.md, the hidden world).",
)
SecretOpt = typer.Option(0, "--secret", min=0, help="With --world TEMPO: the validator secret the world is drawn from.")

SeedOpt = typer.Option(
    None, "--seed", min=0, help="Draw the task family's instance from this seed.  [default: a fresh one, printed]"
)


def load_inputs(
    plan: Path, task: Path | None, task_id: str | None, seed: int | None = None
) -> tuple[PlanDocument, Task | None]:
    """The plan document and the optional task, or :func:`fail` saying why not (also for
    a ``--seed`` or ``--task-id`` that would do nothing)."""
    needs("--seed", seed, "--task", task)
    needs("--task-id", task_id, "--task", task)
    if seed is not None and task is not None and task.exists():
        fail(f"--seed draws an instance of a task family; {task} is a task file")
    from neurons.localrun import load_plan, load_task  # the engine and the scorers: not loaded for --help

    try:
        return load_plan(plan), load_task(task, task_id, seed) if task else None
    except InputError as exc:
        fail(str(exc))


QUIET_LIBRARIES = ("httpx", "httpcore", "bittensor.transport")
"""Loggers that say one line per request (or per connection attempt) at INFO: kept at
WARNING unless the level is debug. A chain outage is reported by
:class:`chain.network.OutageWarner` instead."""


def configure_logging(level: str, *, timestamps: bool = False) -> None:
    """A long-running process's logging: ``level`` for dagnet, WARNING for the HTTP client
    libraries (a line per request would bury everything else) unless ``level`` is debug."""
    stamp = "%(asctime)s " if timestamps else ""
    logging.basicConfig(level=level.upper(), format=f"{stamp}%(levelname)s %(name)s: %(message)s")
    if level.lower() not in ("debug", "trace"):
        for name in QUIET_LIBRARIES:
            logging.getLogger(name).setLevel(logging.WARNING)


def _one_line(message: str) -> str:
    return " ".join(message.split())


def _negative(exc: Exception) -> str | None:
    """What to say of a negative number click took for an option (``subnet stake -5`` gave
    "No such option: -5"); ``None`` for any other error."""
    name = getattr(exc, "option_name", None)
    if not isinstance(exc, NoSuchOption) or not name or not re.fullmatch(r"-\d[\d.]*", name):
        return None
    token = next((arg for arg in sys.argv[1:] if arg.startswith(name)), name)  # -0.5 reaches click as -0
    return f"{token}: a negative number is not accepted here (amounts, counts and sizes are at least 0)"


class OneLineErrors(TyperGroup):
    """The root group: usage errors (unknown option, bad value, missing argument)
    become one ``error:`` line and exit 2, instead of a usage block; a group called
    without a command prints its help and exits 0."""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)  # type: ignore[misc]  # click passes main() keywords only
        except typer.Abort:
            code = 130
        except NoArgsIsHelpError as exc:  # a bare group: its help, as the user asked for it
            typer.echo(exc.ctx.get_help())
            code = 0
        except typer.TyperException as exc:  # click's usage and parameter errors
            ctx = getattr(exc, "ctx", None)
            where = f"{ctx.command_path}: " if ctx is not None else ""
            error(f"{where}{_negative(exc) or exc.format_message()}")
            code = EXIT_INVALID
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)
