"""What a run is told and what it tells: the executor's settings, node statuses, the
per-node record and the run's outcome (docs/execution.md).

These are the public types of :mod:`engine.executor`; every module that runs a plan
shares them from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from protocol.outcomes import RunStatus
from protocol.run_metrics import RunMetrics

__all__ = [
    "BLOCKED",
    "BUDGET_ABORT",
    "BUDGET_REASON",
    "DEADLINE_REASON",
    "FAILED",
    "PENDING",
    "READY",
    "RUNNING",
    "SUCCESS",
    "Attempt",
    "Event",
    "Execution",
    "ExecutorConfig",
    "NodeRecord",
    "NodeStatus",
]


class NodeStatus(StrEnum):
    """Where one node (or one frame instance of it) stands. The first three are a run in
    progress; the last four are settled, and only ``success`` lets a DataRef to it resolve."""

    PENDING = "pending"
    """Waiting for its edge-predecessors to settle."""
    READY = "ready"
    """Its predecessors settled; not yet dispatched."""
    RUNNING = "running"
    """An attempt is in flight."""
    SUCCESS = "success"
    """An attempt returned its output."""
    FAILED = "failed"
    """Every attempt failed (or the run's deadline caught it running)."""
    BLOCKED = "blocked"
    """Never ran: a DataRef named a node that did not succeed, or the deadline came first."""
    BUDGET_ABORT = "budget_abort"
    """Never ran, or stopped: the budget ceiling could not cover it."""


PENDING, READY, RUNNING, SUCCESS, FAILED, BLOCKED, BUDGET_ABORT = NodeStatus

BUDGET_REASON = "budget_ceiling"
DEADLINE_REASON = "deadline"

_INF = math.inf


@dataclass(frozen=True)
class ExecutorConfig:
    """Validator-side execution settings."""

    max_parallel: int = 64  # validator cap; effective = min(plan.max_parallel, cap)
    default_timeout_s: float = 30.0  # per attempt when error_handling gives none
    max_frames: int = 1000  # frames one generator node may emit
    max_frame_instances: int = 10_000  # frame instances in one run, over every generator

    def __post_init__(self) -> None:
        if self.max_parallel < 1:
            raise ValueError("max_parallel must be at least 1")
        if self.max_frames < 0 or self.max_frame_instances < 0:
            raise ValueError("max_frames and max_frame_instances must not be negative")
        if not 0 < self.default_timeout_s < _INF:
            raise ValueError("default_timeout_s must be a positive number of seconds")


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt at a node: when it started and ended (seconds from the start of
    execution) and why it failed (``None`` when it succeeded)."""

    started_s: float
    finished_s: float
    error: str | None


@dataclass(slots=True)
class NodeRecord:
    """What happened to one node. Times are seconds from the start of execution.

    The node's last attempt ends when the node does and fails with the node's reason;
    only the attempts before it are stored (``retried``, with ``last_started_s``), so
    a run without retries builds no attempt objects. :attr:`attempt_log` puts them together.
    """

    status: NodeStatus
    reason: str | None
    attempts: int
    cost_tao: float
    started_s: float | None
    finished_s: float | None
    output: dict[str, Any] | None
    timeouts: int
    unplanned_retries: int
    retried: tuple[Attempt, ...] = ()  # the attempts before the last
    last_started_s: float | None = None  # when the last attempt began
    frame: int | None = None  # a frame instance's frame
    frames: int | None = None  # a generator's count of frames emitted
    instances: tuple[NodeRecord, ...] = ()  # a frame-scoped node's instances, in frame order

    @property
    def attempt_log(self) -> tuple[Attempt, ...]:
        """Every attempt, in order; empty for a node that never ran."""
        if self.last_started_s is None or self.attempts == len(self.retried):
            return self.retried
        error = None if self.status == SUCCESS else self.reason
        finished = self.last_started_s if self.finished_s is None else self.finished_s
        return (*self.retried, Attempt(self.last_started_s, finished, error))


@dataclass
class Execution:
    """The outcome of one plan execution; ``nodes`` is in plan order (empty when invalid)."""

    status: RunStatus
    errors: list[str]
    nodes: dict[str, NodeRecord]
    metrics: RunMetrics
    budget_ceiling: float | None
    tiers: list[list[str]]
    critical_path_s: float
    final_output: dict[str, Any] | None
    output_node: str | None
    total_steps: int


@dataclass(frozen=True, slots=True, init=False)
class Event:
    """One lifecycle transition of one node (of its instance on ``frame``, when given),
    ``t`` seconds from the start of execution."""

    t: float
    node_id: str
    old: str
    new: str
    reason: str | None
    frame: int | None = None

    def __init__(
        self, t: float, node_id: str, old: str, new: str, reason: str | None, frame: int | None = None
    ) -> None:
        """The frozen dataclass's own ``__init__``, writing each slot through its
        descriptor rather than ``object.__setattr__`` (half the cost; a run with an
        ``on_event`` callback builds three events per node)."""
        _set_t(self, t)
        _set_node_id(self, node_id)
        _set_old(self, old)
        _set_new(self, new)
        _set_reason(self, reason)
        _set_frame(self, frame)


_set_t, _set_node_id, _set_old, _set_new, _set_reason, _set_frame = (
    Event.__dict__[name].__set__ for name in ("t", "node_id", "old", "new", "reason", "frame")
)
