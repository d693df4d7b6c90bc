"""Why a step can be skipped with nobody charged: one exception type, its causes as data.

Light on purpose: the state store raises it too (a full disk), and what opens a state
file should not load the engine.
"""

from __future__ import annotations

__all__ = ["INFRASTRUCTURE_CAUSES", "InfrastructureFailure"]

INFRASTRUCTURE_CAUSES = ("chain", "adapter", "reference", "executor", "scorer", "state", "step")
"""Why a step was skipped: the chain could not be read, an external adapter failed,
the reference planner crashed, the executor or the scorer crashed on the reference
plan, the state file could not be written (``state``: a full disk), or anything else
escaped the step (``step``)."""


class InfrastructureFailure(Exception):
    """A step failed for a reason no miner and no task caused; ``cause`` is one of
    :data:`INFRASTRUCTURE_CAUSES`."""

    def __init__(self, cause: str, message: str) -> None:
        assert cause in INFRASTRUCTURE_CAUSES, cause
        super().__init__(f"{cause}: {message}")
        self.cause = cause
