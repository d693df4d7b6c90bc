"""Aggregation of several providers' outputs for one node (docs/execution.md, routing)."""

from __future__ import annotations

import pytest

from protocol.output import Artifacts, NodeOutput
from validator.routing import aggregate


def _out(text: str, code: str = "") -> NodeOutput:
    return NodeOutput(text=text, artifacts=Artifacts(code=code))


def test_majority_vote_returns_the_modal_output_with_its_artifacts() -> None:
    outputs = [_out("b", "first-b"), _out("a", "first-a"), _out("a", "second-a")]
    assert aggregate(outputs, "majority_vote") == _out("a", "first-a")


def test_majority_vote_tie_goes_to_the_first_tied_text_in_provider_order() -> None:
    assert aggregate([_out("x"), _out("y"), _out("y"), _out("x")], "majority_vote").text == "x"
    assert aggregate([_out("y"), _out("x"), _out("x"), _out("y")], "majority_vote").text == "y"


def test_majority_vote_of_one_is_that_output() -> None:
    only = _out("alone", "code")
    assert aggregate([only], "majority_vote") == only


def test_median_logit_odd_count_ignores_non_numeric() -> None:
    outputs = [_out("3"), _out("not a number"), _out(" 1.5 "), _out("10"), _out("inf")]
    assert aggregate(outputs, "median_logit") == _out("3")


def test_median_logit_even_count_takes_the_mean_of_the_middle_two() -> None:
    assert aggregate([_out("1"), _out("2"), _out("4"), _out("100")], "median_logit").text == "3"
    assert aggregate([_out("0.1"), _out("0.2")], "median_logit").text == repr((0.1 + 0.2) / 2)


def test_median_logit_with_no_numeric_text_is_none() -> None:
    assert aggregate([_out("yes"), _out(""), _out("nan")], "median_logit") is None


def test_no_outputs_is_none() -> None:
    assert aggregate([], "majority_vote") is None
    assert aggregate([], "median_logit") is None


def test_unknown_aggregation_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown aggregation"):
        aggregate([_out("1")], "mean")  # type: ignore[arg-type]
