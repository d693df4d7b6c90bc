"""``rag``: ROUGE-L F1 of the final output's text against the reference answer."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from rouge_score.rouge_scorer import RougeScorer

from .base import Quality, output_text


def score(reference: Mapping[str, Any], final_output: object) -> Quality:
    answer = reference.get("reference_answer")
    if not isinstance(answer, str) or not answer.strip():
        return Quality.zero("task has no reference_answer")
    text = output_text(final_output)
    if not text.strip():
        return Quality.zero("final output has no text")
    rouge = _scorer().score(answer, text)["rougeL"]
    return Quality(
        rouge.fmeasure,
        {"metric": "rougeL_f1", "precision": rouge.precision, "recall": rouge.recall},
    )


@cache
def _scorer() -> RougeScorer:
    return RougeScorer(["rougeL"])
