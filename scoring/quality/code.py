"""``code``: the task's tests run against the produced code in the sandbox, plus a lint score.

``artifacts.code`` is saved as ``solution.py`` and the task's ``test_suite`` as
``test_solution.py``; pytest runs in the sandbox and pyflakes lints the solution in
a second sandbox run. ``quality = 0.9·pass_ratio + 0.1·lint`` with
``lint = max(0, 1 − 0.1·warnings)``; 0 when the code is empty, no test passed, or
pytest timed out, crashed or could not collect the tests.

Pytest's report is read from its summary line and cross-checked with its exit
status. Code in the tested process could still forge both: the sandbox protects
the host, not the report (``docs/sandbox.md``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sandbox import SandboxLimits, SandboxResult, SandboxUnavailable, run_python

from .base import Quality, output_code

PASS_WEIGHT = 0.9
LINT_WEIGHT = 0.1
LINT_PENALTY = 0.1

_PYTEST = [
    "-c",
    # No plugin autoload: every validator runs the same pytest, whatever its venv holds.
    "import os, sys; os.environ['PYTEST_DISABLE_PLUGIN_AUTOLOAD'] = '1'; import pytest; "
    "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '--tb=no', 'test_solution.py']))",
]
_PYFLAKES = ["-m", "pyflakes", "solution.py"]
_SUMMARY = re.compile(r"^=*\s*((?:\d+ [a-z]+(?:, )?)+) in [\d.]+s\b.*$", re.MULTILINE)
_COUNT = re.compile(r"(\d+) ([a-z]+)")
_LINT_LINE = re.compile(r"^solution\.py:\d+:", re.MULTILINE)
_COUNTED = ("passed", "failed", "errors", "skipped", "xfailed", "xpassed")


def score(reference: Mapping[str, Any], final_output: object, *, limits: SandboxLimits | None = None) -> Quality:
    tests = reference.get("test_suite")
    if not isinstance(tests, str) or not tests.strip():
        return Quality.zero("task has no test_suite")
    code = output_code(final_output)
    if not code.strip():
        return Quality.zero("final output has no code")
    limits = limits or SandboxLimits()
    try:
        run = run_python({"solution.py": code, "test_solution.py": tests}, _PYTEST, limits=limits)
        passed, total, problem = _test_outcome(run)
        if problem:
            return Quality.zero(problem, isolation=run.isolation, stderr_tail=run.stderr[-500:])
        warnings = _lint_warnings(run_python({"solution.py": code}, _PYFLAKES, limits=limits))
    except SandboxUnavailable as exc:
        return Quality.zero(f"sandbox unavailable: {exc}")
    details: dict[str, Any] = {"passed": passed, "total": total, "isolation": run.isolation}
    if warnings is None:
        lint = 0.0
        details["lint_reason"] = "pyflakes did not finish"
    else:
        lint = max(0.0, 1.0 - LINT_PENALTY * warnings)
        details["lint_warnings"] = warnings
    pass_ratio = passed / total
    details.update(pass_ratio=pass_ratio, lint=lint)
    return Quality(PASS_WEIGHT * pass_ratio + LINT_WEIGHT * lint, details)


def _test_outcome(run: SandboxResult) -> tuple[int, int, str]:
    """(passed, total, problem): problem is "" when the counts can be trusted."""
    if run.timed_out:
        return 0, 0, "tests timed out"
    if run.returncode not in (0, 1):
        return 0, 0, f"pytest exited with status {run.returncode}"
    counts = _summary(run.stdout)
    if counts is None:
        return 0, 0, "no pytest summary in the output"
    passed = counts["passed"]
    total = sum(counts[name] for name in _COUNTED)
    broken = counts["failed"] + counts["errors"]
    if (run.returncode == 0) != (broken == 0) or total == 0:
        return 0, 0, "pytest summary contradicts its exit status"
    if passed == 0:
        return 0, total, "no test passed"
    return passed, total, ""


def _summary(stdout: str) -> dict[str, int] | None:
    """Counts from the last summary line, e.g. ``2 passed, 1 failed, 1 warning in 0.1s``."""
    lines = _SUMMARY.findall(stdout)
    if not lines:
        return None
    counts = dict.fromkeys(_COUNTED, 0)
    for number, word in _COUNT.findall(lines[-1]):
        name = "errors" if word == "error" else word
        if name in counts:
            counts[name] += int(number)
    return counts


def _lint_warnings(run: SandboxResult) -> int | None:
    """pyflakes messages about the solution (syntax errors included), None if it failed."""
    if run.timed_out or run.returncode not in (0, 1):
        return None
    return len(_LINT_LINE.findall(run.stdout)) + len(_LINT_LINE.findall(run.stderr))
