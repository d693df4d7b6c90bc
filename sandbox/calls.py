"""Call a function of untrusted code in the sandbox and bring its return values back as data.

Inside the sandbox a harness (``sandbox/_harness.py``) runs each call in a fresh child
interpreter (``sandbox/_callee.py``) and writes one line per call on the run's stdout,
framed by a random token the children never see. Those lines are parsed here,
strictly: a channel that is not exactly the expected sequence of
``<token> {"call": i, "value"|"error": ...}`` lines counts for nothing. A child can
only shape the answer to its own call, which is what returning a value does; the
expected values never enter the sandbox, the caller compares them outside.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from protocol import strictjson

from .models import SandboxLimits, SandboxResult
from .run import run_python_async, run_sync

SOLUTION = "solution.py"
BUDGET_EXHAUSTED = "judging budget exhausted"
"""The error of every call the run's CPU budget did not reach (or ran out during)."""
_LINE_OVERHEAD = 160  # token, call index, CPU and keys around each value
_START_S = 2.0  # the run's wall beyond its calls' nets: starting and ending the sandbox


@dataclass(frozen=True)
class CallBudget:
    """CPU time the calls of one run may use, measured by the harness from outside them.

    ``cpu_seconds`` per call (its whole process tree: interpreter start, loading the
    code, the call); ``cpu_budget`` for all calls together, past which the rest fail with
    :data:`BUDGET_EXHAUSTED`. Wall time is a safety net only: a call still running after
    ``wall_factor × cpu_seconds`` fails and ends the run's calls.
    """

    cpu_seconds: float
    cpu_budget: float
    wall_factor: float

    def __post_init__(self) -> None:
        for name in ("cpu_seconds", "cpu_budget", "wall_factor"):
            value = getattr(self, name)
            if not 0 < value < float("inf"):
                raise ValueError(f"CallBudget.{name} must be a positive finite number, got {value!r}")

    @property
    def wall_seconds(self) -> float:
        """How long one run may hold its caller: the CPU it may use, stretched by the net
        factor, once more for a call caught by the net, and the sandbox's start."""
        return self.wall_factor * (self.cpu_budget + self.cpu_seconds) + _START_S


@dataclass(frozen=True)
class Call:
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """What one call gave: a JSON value (``returned``), or the reason it gave none, and
    the CPU seconds its processes used."""

    returned: bool
    value: Any = None
    error: str = ""
    cpu_s: float = 0.0


@dataclass(frozen=True)
class CallsReport:
    """One outcome per call, in order. ``problem`` is "" when the result channel was well
    formed; otherwise it says why, and every outcome is a failure."""

    outcomes: list[Outcome]
    problem: str
    run: SandboxResult


class _Malformed(ValueError):
    pass


async def call_function_async(
    source: str,
    entry_point: str,
    calls: Sequence[Call],
    *,
    budget: CallBudget,
    limits: SandboxLimits = SandboxLimits(),
    max_value_bytes: int = 64 * 1024,
) -> CallsReport:
    """Run ``entry_point(*args, **kwargs)`` of ``source`` once per call, in one sandboxed process,
    under ``budget`` (the run's wall limit is the budget's, whatever ``limits`` says).

    Raises :class:`SandboxUnavailable` when nothing can isolate the code.
    """
    token = secrets.token_hex(16)
    spec = {
        "token": token,
        "callee": _source("_callee.py"),
        "entry_point": entry_point,
        "calls": [[list(call.args), dict(call.kwargs)] for call in calls],
        "cpu_seconds": budget.cpu_seconds,
        "cpu_budget": budget.cpu_budget,
        "wall_factor": budget.wall_factor,
        "max_value_bytes": max_value_bytes,
        "exhausted": BUDGET_EXHAUSTED,
    }
    cap = (len(calls) + 1) * (max_value_bytes + _LINE_OVERHEAD)
    run_limits = dataclasses.replace(
        limits, max_output_bytes=max(limits.max_output_bytes, cap), wall_seconds=budget.wall_seconds
    )
    run = await run_python_async(
        {SOLUTION: source}, ["-c", _source("_harness.py")], stdin=json.dumps(spec), limits=run_limits
    )
    try:
        outcomes = _outcomes(run, len(calls), token)
    except _Malformed as exc:
        return CallsReport([Outcome(False, error="malformed result channel")] * len(calls), str(exc), run)
    return CallsReport(outcomes, "", run)


def call_function(source: str, entry_point: str, calls: Sequence[Call], **options: Any) -> CallsReport:
    """Blocking form of :func:`call_function_async`."""
    return run_sync(call_function_async(source, entry_point, calls, **options))


def _outcomes(run: SandboxResult, count: int, token: str) -> list[Outcome]:
    if run.output_truncated:
        raise _Malformed("the result channel passed its size cap")
    lines = run.stdout.split("\n")[:-1]  # a line without its newline was cut short: not a result
    if len(lines) > count:
        raise _Malformed(f"{len(lines)} result lines for {count} calls")
    outcomes = [_outcome(_record(line, index, token), index) for index, line in enumerate(lines)]
    missing = Outcome(False, error="timed out" if run.timed_out else f"not reached (exit status {run.returncode})")
    return [*outcomes, *[missing] * (count - len(lines))]


def _record(line: str, index: int, token: str) -> dict[str, Any]:
    framed, _, text = line.partition(" ")
    if not secrets.compare_digest(framed, token):
        raise _Malformed(f"result line {index} is not framed by the run's token")
    try:
        record = strictjson.loads(text)
    except ValueError as exc:
        raise _Malformed(f"result line {index} is not JSON: {exc}") from None
    if not isinstance(record, dict):
        raise _Malformed(f"result line {index} is not an object")
    return record


def _outcome(record: dict[str, Any], index: int) -> Outcome:
    if record.get("call") != index or type(record.get("call")) is not int:
        raise _Malformed(f"result line {index} is for call {record.get('call')!r}")
    cpu: Any = record.get("cpu")  # JSON: the type() test below checks it (mypy does not narrow on it)
    if type(cpu) not in (int, float) or not 0 <= cpu < float("inf"):
        raise _Malformed(f"result line {index} has no CPU time")
    if set(record) == {"call", "cpu", "value"}:
        return Outcome(True, record["value"], cpu_s=float(cpu))
    if set(record) == {"call", "cpu", "error"} and isinstance(record["error"], str):
        return Outcome(False, error=record["error"][:100], cpu_s=float(cpu))
    raise _Malformed(f"result line {index} has keys {sorted(record)}")


@cache
def _source(name: str) -> str:
    return (Path(__file__).parent / name).read_text(encoding="utf-8")
