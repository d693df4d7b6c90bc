"""How a plan's run and a validator's step end: the values reports, records, metrics and
``/health`` carry. ``StrEnum`` members are their strings, so stored and exported values
read the same as ever."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["RunStatus", "StepOutcome"]


class RunStatus(StrEnum):
    """How one run of a plan ended (``engine.outcome`` decides it)."""

    COMPLETED = "completed"
    """Every node succeeded."""
    PARTIAL = "partial"
    """Some node did not succeed, and the budget never stopped the run."""
    BUDGET_ABORT = "budget_abort"
    """The budget ceiling stopped the run before every node could run."""
    INVALID = "invalid"
    """The plan failed its checks: nothing ran."""


class StepOutcome(StrEnum):
    """How one validator step ended."""

    SETTLED = "settled"
    """Scored and settled."""
    IDLE = "idle"
    """Nothing scored: no active task, no serving miner, or the task's reference failed
    on the instance (which charges the task)."""
    INFRASTRUCTURE = "infrastructure"
    """Failed for a reason no miner caused (the chain, an adapter, the reference run, a
    scorer or executor crash): no miner and no task is charged. A head read that fails is
    one too: no step could run."""
