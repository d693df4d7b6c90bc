"""The execution metrics a validator measures and scoring consumes (docs/execution.md, metrics)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RunMetrics:
    completion_ratio: float  # successes / total nodes
    latency_s: float  # first dispatch to last settle
    cost_tao: float  # every attempt's cost
    retries: int  # attempts beyond the first, over all nodes
    unplanned_retries: int  # transport retries the validator made on its own
    timeouts: int  # attempts that hit their timeout
    hard_failures: int  # failed + blocked nodes
