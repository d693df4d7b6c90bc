"""The result every quality scorer returns, and how scorers read a final output."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Quality:
    """Output quality in [0, 1] and the evidence for it (JSON-serialisable)."""

    value: float
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def zero(cls, reason: str, **details: Any) -> Quality:
        return cls(0.0, {**details, "reason": reason})


def output_text(final_output: object) -> str:
    """The final output's ``text``, or "" when the output is missing or malformed."""
    if isinstance(final_output, dict) and isinstance(final_output.get("text"), str):
        return final_output["text"]
    return ""


def output_code(final_output: object) -> str:
    """The final output's ``artifacts.code``, or "" when missing or malformed."""
    if not isinstance(final_output, dict):
        return ""
    artifacts = final_output.get("artifacts")
    if isinstance(artifacts, dict) and isinstance(artifacts.get("code"), str):
        return artifacts["code"]
    return ""
