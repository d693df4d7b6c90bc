"""``rag``: ROUGE-L F1 of the final output's text against the reference answer, times the
share of the reference's ``key_facts`` (the instance's drawn values) the text carries.

ROUGE-L alone pays an answer with the right words and the wrong numbers; a key fact
counts only where it appears as a whole token (``"127"`` is not found in ``"1270"``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from .base import Quality, output_text

if TYPE_CHECKING:
    from rouge_score.rouge_scorer import RougeScorer


def score(reference: Mapping[str, Any], final_output: object) -> Quality:
    answer = reference.get("reference_answer")
    if not isinstance(answer, str) or not answer.strip():
        return Quality.zero("task has no reference_answer")
    text = output_text(final_output)
    if not text.strip():
        return Quality.zero("final output has no text")
    rouge = _scorer().score(answer, text)["rougeL"]
    facts = [fact for fact in reference.get("key_facts") or [] if isinstance(fact, str) and fact]
    found = [fact for fact in facts if _carries(text, fact)]
    share = len(found) / len(facts) if facts else 1.0
    return Quality(
        rouge.fmeasure * share,
        {
            "metric": "rougeL_f1",
            "precision": rouge.precision,
            "recall": rouge.recall,
            "rougeL_f1": rouge.fmeasure,
            "key_facts_found": len(found),
            "key_facts": len(facts),
        },
    )


def _carries(text: str, fact: str) -> bool:
    return re.search(r"(?<![\w.])" + re.escape(fact) + r"(?![\w]|\.\d)", text) is not None


@cache
def _scorer() -> RougeScorer:
    # rouge-score imports nltk (~1.5 s): paid by the first rag score, not by every import.
    from rouge_score.rouge_scorer import RougeScorer

    return RougeScorer(["rougeL"])
