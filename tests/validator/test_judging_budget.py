"""Judging ``code`` answers has a budget, in CPU time (docs/scoring.md#the-judging-budget).

Each distinct answer is judged once (per step by grouping, across steps by the verdict
cache); each call is bounded by the CPU of everything it starts, so a loaded validator
reaches the verdicts of a quiet one; an answer that waits instead of computing is ended
by the wall-clock net; an answer past its CPU budget fails the rest of its cases, with
that reason.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from protocol.task import Task
from sandbox import isolation_available
from sandbox.calls import BUDGET_EXHAUSTED, CallBudget, CallsReport
from scoring.quality import code
from support.scoring_phase import score_outputs

pytestmark = pytest.mark.skipif(isolation_available() != "bwrap", reason="code is judged only under bwrap")

SLOW_S = 0.3
"""CPU one slow-but-correct call burns: well under the 1 s per-case limit (scaled down
from the 0.95 s of the report, one case per answer, to keep the test short)."""
ANSWERS = 18
LOOP_SHARE = 0.05
"""The least share of a core each busy loop must get while the loaded judge runs: they run
(a loop that never ran burns only its start), whatever else the machine is doing."""
BURNER = "def f(x):\n    n = 0\n    for i in range({iterations}):\n        n += i\n    return x + 1\n"
QUICK = {"entry_point": "f", "cases": [{"args": [1], "expected": 2}]}


@pytest.fixture(autouse=True)
def fresh_verdicts() -> Iterator[None]:
    code._VERDICTS.clear()
    yield
    code._VERDICTS.clear()


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[CallsReport]:
    """Every sandboxed run of the judge, in order."""
    seen: list[CallsReport] = []
    real = code.call_function

    def counting(*args: Any, **kwargs: Any) -> CallsReport:
        seen.append(real(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(code, "call_function", counting)
    return seen


def iterations_for(cpu_s: float) -> int:
    """Loop iterations of :data:`BURNER` that take about ``cpu_s`` of CPU on this machine."""
    namespace: dict[str, Any] = {}
    sample = 2_000_000
    exec(BURNER.format(iterations=sample), namespace)
    started = time.process_time()
    namespace["f"](0)
    return max(1, int(sample * cpu_s / (time.process_time() - started)))


def judge(task: Task, outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each output's score, through the validation step's scoring phase."""
    candidates = score_outputs(task, dict(enumerate(outputs)))
    assert all(candidate.failure is None for candidate in candidates)
    return [candidate.score.model_dump() for candidate in candidates]


def answer(source: str, text: str = "") -> dict[str, Any]:
    return {"text": text, "artifacts": {"code": source, "metadata": {}}}


def cpu_of(pid: int) -> float:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        fields = handle.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def busy_loops(count: int) -> Iterator[list[int]]:
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield [loop.pid for loop in loops]
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


@pytest.mark.e2e
def test_slow_correct_answers_are_judged_once_each_within_budget_and_alike_under_load(
    runs: list[CallsReport],
) -> None:
    task = Task(task_id="code_slow", task_type="code", reference=QUICK)
    iterations = iterations_for(SLOW_S)
    outputs = [answer(BURNER.format(iterations=iterations + k)) for k in range(ANSWERS)]

    quiet = judge(task, outputs)
    assert len(runs) == ANSWERS
    assert all(score["output_quality"] == pytest.approx(1.0) for score in quiet), quiet[0]
    for report in runs:
        used = [outcome.cpu_s for outcome in report.outcomes]
        assert all(0.4 * SLOW_S < cpu < code.CPU_SECONDS_PER_CASE for cpu in used), used
        assert sum(used) < code.JUDGING_CPU_SECONDS

    code._VERDICTS.clear()
    with busy_loops(2) as loops:
        started = time.monotonic()
        loaded = judge(task, outputs)
        wall_s = time.monotonic() - started
        burnt = [cpu_of(pid) for pid in loops]
    assert len(runs) == 2 * ANSWERS
    # The loops ran beside the judge all along. Each gets less than its core when the
    # machine has other work too, which is load as well: 0.67 and 0.75 CPU-s once beside
    # the suite's other workers, where loops that never ran showed 0.01 and 0.02 (quiet: 2.4 of 6.2 s).
    assert min(burnt) > LOOP_SHARE * wall_s, (burnt, wall_s)
    assert loaded == quiet


def test_a_duplicate_answer_is_served_from_the_cache(runs: list[CallsReport]) -> None:
    task = Task(task_id="code_quick", task_type="code", reference=QUICK)
    add_one = "def f(x):\n    return x + 1\n"
    first = judge(task, [answer(add_one), answer(add_one, text="same code, other words"), answer(add_one + "\n")])
    assert len(runs) == 2  # one judgement per distinct code in a step
    assert first[0]["output_quality"] == first[1]["output_quality"] == first[2]["output_quality"] == pytest.approx(1.0)

    again = judge(task, [answer(add_one)])
    assert len(runs) == 2  # the next step: no new sandbox run
    assert again[0] == first[0]

    other_instance = Task(
        task_id="code_quick",
        task_type="code",
        reference={
            "entry_point": "f",
            "cases": [{"args": [2], "expected": 3}],
        },
    )
    judge(other_instance, [answer(add_one)])
    assert len(runs) == 3  # a verdict is kept per instance, never lent to another


def test_the_verdict_cache_is_bounded() -> None:
    verdicts = code._Verdicts(2)
    for key in ("a", "b", "c"):
        verdicts.put((key,), code.Quality(1.0))
    assert verdicts.get(("a",)) is None
    assert verdicts.get(("c",)) == code.Quality(1.0)


def test_code_that_sleeps_fails_within_the_wall_net(runs: list[CallsReport]) -> None:
    budget = CallBudget(cpu_seconds=0.5, cpu_budget=1.5, wall_factor=4.0)
    reference = {"entry_point": "f", "cases": [{"args": [i], "expected": i + 1} for i in range(3)]}
    source = "import time\ndef f(x):\n    time.sleep(60)\n    return x + 1\n"
    started = time.monotonic()
    quality = code.score(reference, answer(source), budget=budget)
    wall = time.monotonic() - started
    net = budget.wall_factor * budget.cpu_seconds
    assert quality.value == 0.0
    assert quality.details["reason"] == f"{BUDGET_EXHAUSTED} after 1 of 3 cases"
    assert "waited past the wall-clock net" in quality.details["errors"]
    assert net <= wall < net + 4.0, wall  # one net, not one per case, never the sleep itself
    assert runs[0].outcomes[0].cpu_s < budget.cpu_seconds


def test_an_answer_past_its_budget_scores_zero_on_the_rest_with_the_reason(runs: list[CallsReport]) -> None:
    budget = CallBudget(cpu_seconds=1.0, cpu_budget=1.0, wall_factor=20.0)  # the budget stops it, not the wall net
    reference = {"entry_point": "f", "cases": [{"args": [i], "expected": i + 1} for i in range(5)]}
    source = "def f(x):\n    while x >= 2:\n        pass\n    return x + 1\n"  # case 2 computes forever
    quality = code.score(reference, answer(source), budget=budget)
    assert (quality.details["passed"], quality.details["total"]) == (2, 5)
    assert quality.details["reason"] == f"{BUDGET_EXHAUSTED} after 2 of 5 cases"
    assert quality.details["errors"] == [BUDGET_EXHAUSTED]
    assert quality.value == pytest.approx(0.9 * 2 / 5 + 0.1)
    used = [outcome.cpu_s for outcome in runs[0].outcomes]
    assert used[3:] == [0.0, 0.0]  # never started
    assert budget.cpu_budget <= sum(used) < budget.cpu_budget + 0.1  # stopped at the budget, give or take a poll


def test_a_call_past_its_cpu_limit_fails_alone() -> None:
    # a wide wall net (6 s): on a loaded machine 0.3 s of CPU can take more than 4x that in wall time
    budget = CallBudget(cpu_seconds=0.3, cpu_budget=3.0, wall_factor=20.0)
    reference = {"entry_point": "f", "cases": [{"args": [i], "expected": i + 1} for i in range(3)]}
    source = (
        "def f(x):\n"
        "    while x == 0:\n"
        "        try:\n"
        "            while True:\n"
        "                pass\n"
        "        except BaseException:\n"
        "            pass\n"
        "    return x + 1\n"
    )
    quality = code.score(reference, answer(source), budget=budget)
    assert (quality.details["passed"], quality.details["errors"]) == (2, ["cpu time limit"])
    assert "reason" not in quality.details


def test_cpu_spent_in_an_escaped_grandchild_counts(runs: list[CallsReport]) -> None:
    """A call that answers at once but leaves a detached grandchild computing on its
    answer pipe is charged the grandchild's CPU, and stopped by it, not by the wall net."""
    budget = CallBudget(cpu_seconds=0.5, cpu_budget=3.0, wall_factor=20.0)
    source = (
        "import os\n"
        "def f(x):\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        "            while True:\n"
        "                pass\n"
        "        os._exit(0)\n"
        "    os.wait()\n"
        "    return x + 1\n"
    )
    started = time.monotonic()
    quality = code.score(QUICK, answer(source), budget=budget)
    wall = time.monotonic() - started
    assert quality.value == 0.0 and quality.details["errors"] == ["cpu time limit"]
    assert runs[0].outcomes[0].cpu_s >= budget.cpu_seconds
    assert wall < budget.wall_factor * budget.cpu_seconds, wall
