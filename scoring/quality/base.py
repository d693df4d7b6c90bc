"""The result every quality scorer returns, and how scorers read a final output."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

UNJUDGED = "unjudged"
"""The details key saying why an output was not judged at all (an :class:`Unjudged`)."""


class Unjudged(StrEnum):
    """Why a scorer could not judge an output: the machine's fault, not the output's.
    The quality is 0 all the same; a caller decides by this value, never by the reason's
    wording (the validator fails such a step as an infrastructure failure)."""

    NO_SANDBOX = "no_sandbox"
    """Code is judged only under the private sandbox, and this machine has none."""


@dataclass(frozen=True)
class Quality:
    """Output quality in [0, 1] and the evidence for it (JSON-serialisable)."""

    value: float
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def zero(cls, reason: str, **details: Any) -> Quality:
        return cls(0.0, {**details, "reason": reason})

    @classmethod
    def unjudged(cls, why: Unjudged, reason: str) -> Quality:
        """Quality 0 because the output could not be judged here (``why``), not for itself."""
        return cls.zero(reason, **{UNJUDGED: str(why)})


def output_text(final_output: object) -> str:
    """The final output's ``text``, or "" when the output is missing or malformed."""
    if isinstance(final_output, dict) and isinstance(text := final_output.get("text"), str):
        return text
    return ""


def output_code(final_output: object) -> str:
    """The final output's ``artifacts.code``, or "" when missing or malformed."""
    if not isinstance(final_output, dict):
        return ""
    artifacts = final_output.get("artifacts")
    if isinstance(artifacts, dict) and isinstance(code := artifacts.get("code"), str):
        return code
    return ""
