"""``code``: call the produced function on the instance's cases in the sandbox, judge here.

The reference is ``{"entry_point": name, "cases": [{"args": [...], "kwargs": {...},
"expected": <JSON>}, ...]}``; the solution is the final output's ``artifacts.code``.
The sandbox calls ``entry_point(*args, **kwargs)`` once per case and hands back the
return values as JSON data (:mod:`sandbox.calls`); the expected values never enter it.
A case passes when the returned value equals ``expected`` after canonicalisation, in
this process, on plain decoded JSON — nothing the tested process says about itself
(its prints, exit status, an object's ``__eq__``) counts.

``quality = 0.9·passed/total + 0.1·lint`` with ``lint = max(0, 1 − 0.1·pyflakes warnings)``,
and 0 when no case passed: lint alone pays nothing. Code is judged only under bubblewrap,
the one isolation that hides the validator's files (``docs/sandbox.md``); elsewhere it
scores 0 with that reason.

Judging has a budget, in CPU time so that a loaded validator reaches the verdicts of a
quiet one: :data:`JUDGING`. A case whose call is cut by it fails; the cases the budget
does not reach fail too, and the details say after how many. Verdicts are kept per
process (:data:`VERDICT_CACHE_SIZE` of them, least recently used out first), keyed by the
code's and the reference's digests, whatever the verdict (one the budget or the wall net
cut included): the same code on the same instance is judged once.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from protocol.errors import format_validation_error
from sandbox import PRIVATE_ISOLATION, SandboxLimits, SandboxResult, SandboxUnavailable, isolation_available, run_python
from sandbox.calls import BUDGET_EXHAUSTED, SOLUTION, Call, CallBudget, CallsReport, Outcome, call_function

from . import jsonvalue
from .base import Quality, Unjudged, output_code

PASS_WEIGHT = 0.9
LINT_WEIGHT = 0.1
LINT_PENALTY = 0.1
CPU_SECONDS_PER_CASE = 1.0
"""CPU one case's call may use: a fresh interpreter, loading the solution and the call."""
JUDGING_CPU_SECONDS = 3.0
"""CPU one answer's calls may use together (per miner per step: a miner sends one answer)."""
WALL_NET_FACTOR = 4.0
"""A call still running after this many times :data:`CPU_SECONDS_PER_CASE` of wall time is
waiting, not computing: it fails and ends the answer's judgement."""
JUDGING = CallBudget(cpu_seconds=CPU_SECONDS_PER_CASE, cpu_budget=JUDGING_CPU_SECONDS, wall_factor=WALL_NET_FACTOR)
VERDICT_CACHE_SIZE = 4096

_PYFLAKES = ["-c", f"import sys; sys.path.insert(0, '.'); from pyflakes.api import main; main(args=[{SOLUTION!r}])"]
_LINT_PREFIX = f"{SOLUTION}:"


class Case(BaseModel):
    model_config = ConfigDict(extra="forbid")

    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    expected: Any


class CodeReference(BaseModel):
    model_config = ConfigDict(extra="forbid")

    entry_point: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    cases: list[Case] = Field(min_length=1)


def score(
    reference: Mapping[str, Any],
    final_output: object,
    *,
    limits: SandboxLimits | None = None,
    budget: CallBudget = JUDGING,
) -> Quality:
    try:
        ref = CodeReference.model_validate(reference)
    except ValidationError as exc:
        return Quality.zero(f"task reference is not a code reference: {format_validation_error(exc)}")
    code = output_code(final_output)
    if not code.strip():
        return Quality.zero("final output has no code")
    if isolation_available() != PRIVATE_ISOLATION:
        return Quality.unjudged(
            Unjudged.NO_SANDBOX,
            f"code is judged only under {PRIVATE_ISOLATION}: this sandbox cannot hide the validator's files",
        )
    limits = limits or SandboxLimits()
    key = _verdict_key(ref, code, limits, budget)
    quality = _VERDICTS.get(key)
    if quality is None:
        try:
            quality = _judge(ref, code, limits, budget)
        except SandboxUnavailable as exc:
            return Quality.unjudged(Unjudged.NO_SANDBOX, f"sandbox unavailable: {exc}")
        _VERDICTS.put(key, quality)  # whatever it is: a slow answer sent again is not judged again
    return quality


def has_verdict(reference: Mapping[str, Any], final_output: object) -> bool:
    """Whether :func:`score` (at its defaults) would answer from the verdict cache, running nothing."""
    try:
        ref = CodeReference.model_validate(reference)
    except ValidationError:
        return True  # scored at once, nothing run
    code = output_code(final_output)
    return not code.strip() or _verdict_key(ref, code, SandboxLimits(), JUDGING) in _VERDICTS


def _verdict_key(ref: CodeReference, code: str, limits: SandboxLimits, budget: CallBudget) -> tuple[Any, ...]:
    return (_digest(code), _digest(json.dumps(ref.model_dump(mode="json"), sort_keys=True)), limits, budget)


def _judge(ref: CodeReference, code: str, limits: SandboxLimits, budget: CallBudget) -> Quality:
    """The verdict: a call the budget or the wall net cut fails, and so stays."""
    calls = [Call(case.args, case.kwargs) for case in ref.cases]
    report = call_function(code, ref.entry_point, calls, budget=budget, limits=limits)
    passed = sum(_passes(case, outcome) for case, outcome in zip(ref.cases, report.outcomes, strict=True))
    details = _details(report, passed, len(ref.cases))
    if passed == 0:
        reason = report.problem or details.pop("reason", "no case passed")
        return Quality.zero(reason, **details)
    warnings = _lint_warnings(run_python({SOLUTION: code, **_pyflakes_files()}, _PYFLAKES, limits=limits))
    if warnings is None:
        lint = 0.0
        details["lint_reason"] = "pyflakes did not finish"
    else:
        lint = max(0.0, 1.0 - LINT_PENALTY * warnings)
        details["lint_warnings"] = warnings
    details["lint"] = lint
    return Quality(PASS_WEIGHT * passed / len(ref.cases) + LINT_WEIGHT * lint, details)


def _passes(case: Case, outcome: Outcome) -> bool:
    if not outcome.returned:
        return False
    try:
        return jsonvalue.canonical(outcome.value) == jsonvalue.canonical(case.expected)
    except jsonvalue.NotJSON:
        return False


def _details(report: CallsReport, passed: int, total: int) -> dict[str, Any]:
    errors = sorted({outcome.error for outcome in report.outcomes if outcome.error})
    details: dict[str, Any] = {"passed": passed, "total": total, "pass_ratio": passed / total}
    details.update(errors=errors[:5], isolation=report.run.isolation, stderr_tail=report.run.stderr[-500:])
    if report.problem:
        details["problem"] = report.problem
    judged = next((index for index, outcome in enumerate(report.outcomes) if outcome.error == BUDGET_EXHAUSTED), None)
    if judged is not None:
        details["reason"] = f"{BUDGET_EXHAUSTED} after {judged} of {total} cases"
    return details


def _lint_warnings(run: SandboxResult) -> int | None:
    """pyflakes messages about the solution (syntax errors included), None if it failed."""
    if run.timed_out or run.returncode not in (0, 1):
        return None
    lines = (run.stdout + run.stderr).splitlines()
    return sum(1 for line in lines if line.startswith(_LINT_PREFIX))


@cache
def _pyflakes_files() -> dict[str, str]:
    """pyflakes' own sources, staged next to the solution: the sandbox sees no site-packages."""
    root = resources.files("pyflakes")
    return {
        f"pyflakes/{item.name}": item.read_text(encoding="utf-8")
        for item in root.iterdir()
        if item.name.endswith(".py")
    }


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class _Verdicts:
    """A bounded, thread-safe map from (code, reference, limits) to the verdict (LRU)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[tuple[Any, ...], Quality] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> Quality | None:
        with self._lock:
            quality = self._items.get(key)
            if quality is None:
                return None
            self._items.move_to_end(key)
            return copy.deepcopy(quality)

    def put(self, key: tuple[Any, ...], quality: Quality) -> None:
        with self._lock:
            self._items[key] = copy.deepcopy(quality)
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def __contains__(self, key: tuple[Any, ...]) -> bool:
        with self._lock:
            return key in self._items

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_VERDICTS = _Verdicts(VERDICT_CACHE_SIZE)
