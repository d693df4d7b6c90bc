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
_LINE_OVERHEAD = 160  # token, call index and keys around each value


@dataclass(frozen=True)
class Call:
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """What one call gave: a JSON value (``returned``), or the reason it gave none."""

    returned: bool
    value: Any = None
    error: str = ""


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
    limits: SandboxLimits = SandboxLimits(),
    seconds_per_call: float = 2.0,
    max_value_bytes: int = 64 * 1024,
) -> CallsReport:
    """Run ``entry_point(*args, **kwargs)`` of ``source`` once per call, in one sandboxed process.

    Raises :class:`SandboxUnavailable` when nothing can isolate the code.
    """
    token = secrets.token_hex(16)
    spec = {
        "token": token,
        "callee": _source("_callee.py"),
        "entry_point": entry_point,
        "calls": [[list(call.args), dict(call.kwargs)] for call in calls],
        "seconds": seconds_per_call,
        "max_value_bytes": max_value_bytes,
    }
    cap = (len(calls) + 1) * (max_value_bytes + _LINE_OVERHEAD)
    run_limits = dataclasses.replace(limits, max_output_bytes=max(limits.max_output_bytes, cap))
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
    if set(record) == {"call", "value"}:
        return Outcome(True, record["value"])
    if set(record) == {"call", "error"} and isinstance(record["error"], str):
        return Outcome(False, error=record["error"][:100])
    raise _Malformed(f"result line {index} has keys {sorted(record)}")



@cache
def _source(name: str) -> str:
    return (Path(__file__).parent / name).read_text(encoding="utf-8")
