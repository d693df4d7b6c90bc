"""Judging budget per tempo: a verdict is kept whatever it is, and each miner has a judging
allowance per tempo (docs/scoring.md#the-judging-budget, validator/judging.py).

The sandbox is replaced by a counter that answers as a slow-but-correct answer's run ends
when it is cut by the wall net (the run timed out): the verdicts the issue saw re-judged
every step, making the score phase take 18 / 36 / 73 s for 2 / 4 / 8 such answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from protocol.task import Task
from sandbox import SandboxResult
from sandbox.calls import CallsReport, Outcome
from scoring.quality import code
from support.scoring_phase import score_outputs
from validator.judging import JUDGINGS_PER_TEMPO, NOT_JUDGED, JudgingAllowance

REFERENCE = {"entry_point": "f", "cases": [{"args": [1], "expected": 2}]}
TASK = Task(task_id="code_slow", task_type="code", reference=REFERENCE)
CUT_BY_THE_NET = SandboxResult(
    returncode=None, stdout="", stderr="", timed_out=True, output_truncated=False, wall_s=18.0, isolation="bwrap"
)


@pytest.fixture
def judged(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The code of every answer the judge ran in the (stand-in) sandbox, in order."""
    seen: list[str] = []

    def slow_run(source: str, *args: Any, **kwargs: Any) -> CallsReport:
        seen.append(source)
        return CallsReport([Outcome(False, error="waited past the wall-clock net")], "", CUT_BY_THE_NET)

    code._VERDICTS.clear()
    monkeypatch.setattr(code, "isolation_available", lambda: "bwrap")
    monkeypatch.setattr(code, "call_function", slow_run)
    yield seen
    code._VERDICTS.clear()


def slow_answer(k: int) -> dict[str, Any]:
    return {"text": "", "artifacts": {"code": f"def f(x):\n    return x + 1  # {k}\n", "metadata": {}}}


def score_step(answers: dict[int, dict[str, Any]], judging: JudgingAllowance) -> dict[int, Any]:
    """One step's scoring phase over ``uid -> final output``: each uid's quality, or its failure."""
    candidates = score_outputs(TASK, answers, judging)
    return {c.miner.uid: c.failure if c.failure else c.score.output_quality for c in candidates}


@pytest.mark.parametrize("answers", [2, 4, 8])
def test_slow_code_answers_are_judged_once_per_tempo(answers: int, judged: list[str]) -> None:
    allowance = JudgingAllowance()
    for _ in range(5):  # five steps of one tempo, every miner sending its same slow answer
        scores = score_step({uid: slow_answer(uid) for uid in range(answers)}, allowance.for_step(0, 7))
        assert scores == dict.fromkeys(range(answers), 0.0)
    assert len(judged) == answers


def test_a_miner_past_its_allowance_is_not_judged_that_tempo(judged: list[str]) -> None:
    allowance = JudgingAllowance()
    outcomes = [score_step({3: slow_answer(k)}, allowance.for_step(0, 1))[3] for k in range(JUDGINGS_PER_TEMPO + 2)]
    assert outcomes == [0.0] * JUDGINGS_PER_TEMPO + [NOT_JUDGED] * 2
    assert len(judged) == JUDGINGS_PER_TEMPO
    assert score_step({4: slow_answer(-1)}, allowance.for_step(0, 1)) == {4: 0.0}  # another miner's own allowance

    assert score_step({3: slow_answer(JUDGINGS_PER_TEMPO)}, allowance.for_step(0, 2)) == {3: 0.0}  # the next tempo
    assert len(judged) == JUDGINGS_PER_TEMPO + 2


def test_an_answer_judged_before_costs_no_allowance(judged: list[str]) -> None:
    allowance = JudgingAllowance(per_miner=1)
    assert score_step({1: slow_answer(0)}, allowance.for_step(0, 1)) == {1: 0.0}
    assert score_step({1: slow_answer(0), 2: slow_answer(0)}, allowance.for_step(0, 1)) == {1: 0.0, 2: 0.0}
    assert score_step({1: slow_answer(1)}, allowance.for_step(0, 1)) == {1: NOT_JUDGED}
    assert score_step({1: slow_answer(1), 2: slow_answer(1)}, allowance.for_step(0, 1)) == {1: 0.0, 2: 0.0}
    assert len(judged) == 2
