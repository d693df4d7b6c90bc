"""The composite score (docs/scoring.md): every term, gate and clamp at its boundary, and determinism."""

from __future__ import annotations

import json
import math

import pytest

from protocol.run_metrics import RunMetrics
from protocol.synapse import Constraints
from protocol.task import Task
from scoring import Score, composite, invalid_score, score_run


def metrics(**overrides: float) -> RunMetrics:
    values = dict(completion_ratio=1.0, latency_s=0.0, cost_tao=0.0, retries=0)
    values.update(unplanned_retries=0, timeouts=0, hard_failures=0)
    values.update(overrides)
    return RunMetrics(**values)  # type: ignore[arg-type]


def score(quality: float = 1.0, budget: float | None = 1.0, max_latency: float = 10.0, **run: float) -> Score:
    return composite(
        output_quality=quality, metrics=metrics(**run), max_budget_tao=budget, max_latency_seconds=max_latency
    )


def test_perfect_run_scores_one() -> None:
    result = score()
    terms = (result.S, result.S_success, result.S_cost, result.S_latency, result.S_reliability)
    assert terms == (1.0, 1.0, 1.0, 1.0, 1.0)


def test_weights_combine_the_terms() -> None:
    result = score(quality=0.9, completion_ratio=1.0, cost_tao=0.5, latency_s=2.5, unplanned_retries=1)
    assert result.S_success == 0.9
    assert result.S_cost == 0.5
    assert result.S_latency == 0.75
    assert result.S_reliability == 0.9
    assert result.S == round(0.50 * 0.9 + 0.25 * 0.5 + 0.15 * 0.75 + 0.10 * 0.9, 9)


def test_success_is_quality_times_completion() -> None:
    result = score(quality=0.8, completion_ratio=0.5)
    assert result.S_success == 0.4
    assert (result.output_quality, result.completion_ratio) == (0.8, 0.5)


@pytest.mark.parametrize(("quality", "completion"), [(0.7, 1.0), (1.0, 0.7), (0.875, 0.8)])
def test_gate_is_closed_at_exactly_0_7(quality: float, completion: float) -> None:
    result = score(quality=quality, completion_ratio=completion)
    assert result.S_success == 0.7
    assert (result.S_cost, result.S_latency) == (0.0, 0.0)
    assert result.details["gate_open"] is False


def test_gate_opens_just_above_0_7() -> None:
    result = score(quality=0.700000001)
    assert result.S_success > 0.7
    assert (result.S_cost, result.S_latency) == (1.0, 1.0)


def test_budget_exactly_spent_gives_zero_cost_term() -> None:
    assert score(budget=2.0, cost_tao=2.0).S_cost == 0.0


def test_overspending_does_not_go_negative() -> None:
    assert score(budget=1.0, cost_tao=5.0).S_cost == 0.0


def test_no_budget_gives_zero_cost_term_and_says_why() -> None:
    result = score(budget=None, cost_tao=0.0)
    assert result.S_cost == 0.0
    assert "max_budget_tao" in result.details["S_cost_reason"]


def test_zero_latency_gives_full_latency_term() -> None:
    assert score(latency_s=0.0).S_latency == 1.0


def test_latency_at_the_limit_gives_zero() -> None:
    assert score(latency_s=10.0, max_latency=10.0).S_latency == 0.0


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        ({"unplanned_retries": 1}, 0.9),
        ({"timeouts": 1}, 0.8),
        ({"hard_failures": 1}, 0.5),
        ({"unplanned_retries": 1, "timeouts": 1, "hard_failures": 1}, 0.2),
        ({"hard_failures": 2}, 0.0),
        ({"unplanned_retries": 5, "timeouts": 5, "hard_failures": 5}, 0.0),
        ({"retries": 7}, 1.0),  # declared retries are not penalised
    ],
)
def test_reliability_penalties_and_clamp(run: dict[str, int], expected: float) -> None:
    assert score(**run).S_reliability == expected


def test_reliability_counts_even_when_the_gate_is_closed() -> None:
    result = score(quality=0.5)
    assert (result.S_success, result.S_reliability, result.S) == (0.5, 1.0, 0.35)


@pytest.mark.parametrize("completion", [1.0, 0.0])
def test_a_wrong_answer_earns_nothing_reliability_included(completion: float) -> None:
    result = score(quality=0.0, completion_ratio=completion)
    assert result.S_reliability == 1.0
    assert result.S == 0.0
    assert "output_quality is 0" in result.details["S_reason"]


def test_the_smallest_positive_quality_keeps_its_reliability_term() -> None:
    assert score(quality=1e-9).S == round(0.5 * 1e-9 + 0.1, 9)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0, 2.0])
def test_out_of_range_quality_is_clamped_never_raised(bad: float) -> None:
    result = score(quality=bad)
    assert 0.0 <= result.output_quality <= 1.0
    assert 0.0 <= result.S <= 1.0


def test_published_values_have_at_most_nine_decimals() -> None:
    result = score(quality=1 / 3, completion_ratio=1.0)
    for name in ("S", "S_success", "S_cost", "S_latency", "S_reliability", "output_quality", "completion_ratio"):
        value = getattr(result, name)
        assert value == round(value, 9)


def test_identical_inputs_give_identical_bits() -> None:
    runs = [score(quality=0.83, completion_ratio=0.9, cost_tao=0.123, latency_s=1.7, timeouts=1) for _ in range(3)]
    dumps = {json.dumps(r.model_dump(), sort_keys=True) for r in runs}
    assert len(dumps) == 1
    assert len({r.S.hex() for r in runs}) == 1


def test_invalid_score_is_all_zero_with_reason() -> None:
    result = invalid_score("cycle: a -> b -> a")
    assert result.S == result.S_success == result.S_reliability == result.completion_ratio == 0.0
    assert result.details == {"invalid": True, "reason": "cycle: a -> b -> a"}


def _rag_task() -> Task:
    return Task(
        task_id="t1",
        task_type="rag",
        constraints=Constraints(max_budget_tao=1.0, max_latency_seconds=10.0),
        reference={"reference_answer": "Emperor Wu of Han died at the age of 69"},
    )


def test_score_run_combines_quality_and_composite() -> None:
    output = {"text": "Emperor Wu of Han died at the age of 69", "artifacts": {"code": "", "metadata": {}}}
    result = score_run(_rag_task(), metrics=metrics(cost_tao=0.5, latency_s=5.0), final_output=output)
    assert result.output_quality == 1.0
    assert (result.S_cost, result.S_latency) == (0.5, 0.5)
    assert result.details["task_type"] == "rag"
    assert result.details["quality"]["metric"] == "rougeL_f1"


def test_score_run_of_an_invalid_run_is_zero() -> None:
    result = score_run(_rag_task(), metrics=metrics(), final_output={"text": "anything"}, valid=False)
    assert result.S == 0.0 and result.details["invalid"] is True


def test_score_run_without_output_scores_only_reliability() -> None:
    result = score_run(_rag_task(), metrics=metrics(completion_ratio=0.0, hard_failures=1), final_output=None)
    assert (result.S_success, result.S_reliability) == (0.0, 0.5)
    assert result.details["quality"]["reason"] == "final output has no text"
