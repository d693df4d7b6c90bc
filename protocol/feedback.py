"""Feedback: what a validator tells one miner about how its plan ran (docs/protocol.md).

After a step is scored, a validator sends each miner it queried a signed
:class:`StepFeedback` about that miner's own execution, and nothing about anyone
else's: per node, the subnet it ran on, every attempt (when it started, how long it
took, whether it failed and why) and what the node cost; the step's score parts, or
the reason it scored 0. A real partner subnet is not its advertised profile, so this
is how a miner learns what the subnets it plans on actually do.

These are the wire models; :func:`engine.feedback.node_feedback` builds the nodes
from an execution. Sizes are bounded (:data:`MAX_FEEDBACK_NODES`, reasons cut to
:data:`MAX_REASON_CHARS`) so a feedback message is small whatever a plan held.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "FEEDBACK_VERSION",
    "MAX_FEEDBACK_NODES",
    "MAX_REASON_CHARS",
    "AttemptFeedback",
    "NodeFeedback",
    "StepFeedback",
    "clip_reason",
]

FEEDBACK_VERSION = 1
MAX_FEEDBACK_NODES = 512
"""Nodes (frame instances included) one feedback message lists; the rest are counted in ``nodes_omitted``."""
MAX_REASON_CHARS = 240
"""An error or reason is cut to this many characters."""


def clip_reason(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_REASON_CHARS:
        return text
    return text[: MAX_REASON_CHARS - 1] + "…"


class AttemptFeedback(BaseModel):
    """One attempt at a node: seconds from the start of the execution (simulated time on
    owned execution) and its error, ``None`` when it succeeded."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    started_s: float = Field(ge=0, allow_inf_nan=False)
    latency_s: float = Field(ge=0, allow_inf_nan=False)
    error: str | None = Field(default=None, max_length=MAX_REASON_CHARS)

    @property
    def ok(self) -> bool:
        return self.error is None


class NodeFeedback(BaseModel):
    """One node of the miner's plan (a frame instance carries its ``frame``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    node_id: str = Field(max_length=256)
    subnet: str = Field(max_length=64)
    action: str = Field(max_length=64)
    status: str = Field(max_length=32)
    reason: str | None = Field(default=None, max_length=MAX_REASON_CHARS)
    cost_tao: float = Field(ge=0, allow_inf_nan=False)
    attempts: list[AttemptFeedback] = Field(default_factory=list, max_length=64)
    frame: int | None = Field(default=None, ge=0)


class StepFeedback(BaseModel):
    """What one validator tells one miner about one scored step of its own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = FEEDBACK_VERSION
    validator_hotkey: str = Field(max_length=64)
    miner_uid: int = Field(ge=0)
    miner_hotkey: str | None = Field(default=None, max_length=64)
    """The hotkey the feedback is for; a miner refuses feedback that names another."""
    block: int = Field(ge=0)
    tempo: int | None = Field(default=None, ge=0)
    task_id: str = Field(max_length=128)
    hint_tier: str = Field(max_length=16)
    outcome: str = Field(max_length=32)
    """The step outcome for this miner: the execution's status (``completed``, ``partial``,
    ``budget_abort``, …) or why there was none (``invalid``, ``no_answer``, …)."""
    reason: str | None = Field(default=None, max_length=MAX_REASON_CHARS)
    score: dict[str, float] = Field(default_factory=dict, max_length=16)
    """``S`` and its parts (``S_success``, ``S_cost``, ``S_latency``, ``S_reliability``,
    ``output_quality``, ``completion_ratio``); empty when the step was not scored."""
    nodes: list[NodeFeedback] = Field(default_factory=list, max_length=MAX_FEEDBACK_NODES)
    nodes_omitted: int = Field(default=0, ge=0)
