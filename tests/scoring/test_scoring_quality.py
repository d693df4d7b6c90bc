"""Quality scorers for rag, agent and data_transform, and the dispatch by task type."""

from __future__ import annotations

from typing import Any

import pytest
from rouge_score.rouge_scorer import RougeScorer

from protocol.task import Task
from scoring import output_quality


def task(task_type: str, **reference: Any) -> Task:
    return Task(task_id="t", task_type=task_type, reference=reference)


def out(text: str) -> dict[str, Any]:
    return {"text": text, "artifacts": {"code": "", "metadata": {}}}


# --- rag ---------------------------------------------------------------------------------

REFERENCE = "Julius Caesar died at the age of 55 in 44 BC."


@pytest.mark.parametrize(
    "text",
    [
        "Julius Caesar died at the age of 55 in 44 BC.",
        "Caesar died aged 55.",
        "At the age of 55, in 44 BC, Julius Caesar was killed.",
        "The Roman general died in March.",
        "completely unrelated words here",
    ],
)
def test_rag_is_rouge_l_f1_as_rouge_score_computes_it(text: str) -> None:
    expected = RougeScorer(["rougeL"]).score(REFERENCE, text)["rougeL"].fmeasure
    quality = output_quality(task("rag", reference_answer=REFERENCE), out(text))
    assert quality.value == expected
    assert quality.details["metric"] == "rougeL_f1"


def test_rag_hand_computed_value() -> None:
    # reference tokens: the cat sat on the mat (6); output: the cat on mat (4); LCS = 4
    quality = output_quality(task("rag", reference_answer="the cat sat on the mat"), out("the cat on mat"))
    precision, recall = 4 / 4, 4 / 6
    assert quality.value == pytest.approx(2 * precision * recall / (precision + recall))


@pytest.mark.parametrize("final_output", [None, {}, {"text": 5}, out(""), out("   ")])
def test_rag_without_text_is_zero(final_output: Any) -> None:
    quality = output_quality(task("rag", reference_answer=REFERENCE), final_output)
    assert quality.value == 0.0 and quality.details["reason"]


def test_rag_without_reference_is_zero_with_reason() -> None:
    quality = output_quality(task("rag"), out("anything"))
    assert (quality.value, quality.details["reason"]) == (0.0, "task has no reference_answer")


# --- agent -------------------------------------------------------------------------------


def agent(text: str, *items: Any) -> Any:
    return output_quality(task("agent", goal_checklist=list(items)), out(text))


def test_keyword_is_a_case_insensitive_substring() -> None:
    quality = agent("The Answer is FORTY-TWO", {"type": "keyword", "text": "forty-two"},
                    {"type": "keyword", "text": "answer is"}, {"type": "keyword", "text": "43"})  # fmt: skip
    assert quality.value == pytest.approx(2 / 3)
    assert [item["passed"] for item in quality.details["items"]] == [True, True, False]
    assert (quality.details["passed"], quality.details["total"]) == (2, 3)


def test_regex_uses_search() -> None:
    quality = agent("total: 1234 items", {"type": "regex", "pattern": r"\d{4}"}, {"type": "regex", "pattern": r"^\d+"})
    assert quality.value == 0.5


def test_invalid_or_oversized_regex_is_not_passed() -> None:
    quality = agent("abc", {"type": "regex", "pattern": "(unclosed"}, {"type": "regex", "pattern": "a" * 5000},
                    {"type": "regex", "pattern": "abc"})  # fmt: skip
    assert quality.value == pytest.approx(1 / 3)
    reasons = [item.get("reason", "") for item in quality.details["items"]]
    assert reasons[0].startswith("invalid pattern") and "longer than" in reasons[1]


def test_json_key_follows_dotted_paths_and_list_indexes() -> None:
    text = '{"result": {"city": "Paris", "tags": ["a", "b"]}, "n": 2}'
    quality = agent(
        text,
        {"type": "json_key", "key": "result.city"},
        {"type": "json_key", "key": "result.tags.1", "equals": "b"},
        {"type": "json_key", "key": "n", "equals": 2.0},
        {"type": "json_key", "key": "result.country"},
        {"type": "json_key", "key": "result.city", "equals": "London"},
    )
    assert [item["passed"] for item in quality.details["items"]] == [True, True, True, False, False]


def test_json_key_equals_null_is_checked_not_ignored() -> None:
    assert agent('{"a": 1}', {"type": "json_key", "key": "a", "equals": None}).value == 0.0
    assert agent('{"a": null}', {"type": "json_key", "key": "a", "equals": None}).value == 1.0


def test_json_key_on_non_json_text_is_not_passed() -> None:
    quality = agent("not json", {"type": "json_key", "key": "a"})
    assert quality.value == 0.0 and quality.details["items"][0]["reason"] == "text is not JSON"


def test_malformed_and_unknown_items_count_as_not_passed() -> None:
    quality = agent("hello", "oops", {"type": "telepathy"}, {"type": "keyword"}, {"type": "keyword", "text": "hello"})
    assert (quality.details["passed"], quality.details["total"]) == (1, 4)


@pytest.mark.parametrize("checklist", [None, [], "keyword", {"type": "keyword"}])
def test_missing_checklist_is_zero(checklist: Any) -> None:
    quality = output_quality(task("agent", goal_checklist=checklist), out("x"))
    assert (quality.value, quality.details["reason"]) == (0.0, "task has no goal_checklist")


# --- data_transform ----------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {"total": {"type": "number"}, "items": {"type": "array"}},
    "required": ["total", "items"],
}


def transform(text: str, expected: Any, schema: Any = None) -> Any:
    reference: dict[str, Any] = {"expected_output": expected}
    if schema is not None:
        reference["output_schema"] = schema
    return output_quality(task("data_transform", **reference), out(text))


def test_exact_match_after_canonicalisation() -> None:
    quality = transform('{"items": [1, 2.0], "total": 3.0}', {"total": 3, "items": [1.0, 2]}, SCHEMA)
    assert quality.value == 1.0
    assert quality.details == {"schema_valid": True, "exact_match": True}


def test_booleans_are_not_numbers() -> None:
    assert transform("[true]", [1]).value == 0.0
    assert transform("[true]", [True]).value == 1.0


def test_list_order_matters() -> None:
    assert transform("[2, 1]", [1, 2]).value == 0.0


def test_schema_valid_but_wrong_scores_zero_and_says_so() -> None:
    quality = transform('{"total": 4, "items": []}', {"total": 3, "items": []}, SCHEMA)
    assert quality.value == 0.0
    assert quality.details["schema_valid"] is True and quality.details["exact_match"] is False
    assert quality.details["reason"] == "schema-valid but differs from expected_output"


def test_schema_failure_scores_zero_even_when_equal() -> None:
    quality = transform('{"total": "3"}', {"total": "3"}, SCHEMA)
    assert quality.value == 0.0
    assert quality.details["schema_valid"] is False
    assert any("items" in message for message in quality.details["schema_errors"])


@pytest.mark.parametrize("text", ["not json", "", "NaN", '{"a": Infinity}', "[" * 100 + "]" * 100, "1" * 5000])
def test_non_json_scores_zero(text: str) -> None:
    quality = transform(text, {"a": 1})
    assert quality.value == 0.0 and "not JSON" in quality.details["reason"]


def test_unusable_schema_scores_zero_with_reason() -> None:
    quality = transform('{"a": 1}', {"a": 1}, {"type": "no-such-type"})
    assert quality.value == 0.0 and "output_schema" in quality.details["reason"]


def test_expected_null_is_a_real_expectation() -> None:
    assert transform("null", None).value == 1.0
    assert output_quality(task("data_transform"), out("null")).details["reason"] == "task has no expected_output"


# --- dispatch ----------------------------------------------------------------------------


def test_unknown_task_type_scores_zero_with_reason() -> None:
    quality = output_quality(task("poetry"), out("roses are red"))
    assert quality.value == 0.0 and quality.details["reason"] == "unknown task type 'poetry'"


@pytest.mark.parametrize(
    ("text", "share"),
    [
        ("Velo has 127 residents and Tor has 90 residents.", 1.0),
        ("Velo has 1270 residents and Tor has 90 residents.", 0.5),
        ("Velo has 12.7 residents and Tor has 9 residents.", 0.0),
    ],
)
def test_rag_pays_only_for_the_key_facts_the_answer_carries(text: str, share: float) -> None:
    answer = "Velo has 127 residents and Tor has 90 residents."
    rouge = RougeScorer(["rougeL"]).score(answer, text)["rougeL"].fmeasure
    quality = output_quality(task("rag", reference_answer=answer, key_facts=["127", "90"]), out(text))
    assert quality.value == pytest.approx(rouge * share)
    assert quality.details["key_facts_found"] == round(2 * share)


def test_agent_credits_nothing_the_inputs_already_contain() -> None:
    checklist = [
        {"type": "json_key", "key": "first", "equals": "Lake Ura"},
        {"type": "json_key", "key": "total", "equals": 1234},
        {"type": "regex", "pattern": r"\b1234\b"},
    ]
    given = Task(
        task_id="t",
        task_type="agent",
        reference={"goal_checklist": checklist},
        instance_inputs={"subjects": ["Lake Ura", "Lake Ixa"]},
    )
    echo = output_quality(given, out('{"first": "Lake Ura"}'))
    assert echo.value == 0.0 and echo.details["given"] == 1
    assert output_quality(given, out('{"first": "Lake Ura", "total": 1234}')).value == 1.0
    assert output_quality(given, out('{"total": 1234}')).value == 0.0  # a given item is still asked for
