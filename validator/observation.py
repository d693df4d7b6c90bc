"""What the validator shows of its steps: how recent steps ended (for ``/health``), the
last settled step (for logs and live views), and each step's Prometheus metrics."""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass

from protocol.outcomes import RunStatus, StepOutcome
from protocol.task import Task

from .errors import PeerTimeout
from .lifecycle import no_sandbox
from .outcome import MinerOutcome, StepResult
from .prometheus import ValidatorMetrics

log = logging.getLogger(__name__)

STEP_HISTORY = 32
"""How many recent step outcomes the loop keeps for ``/health``."""


@dataclass(frozen=True, slots=True)
class StepSummary:
    """What a settled step did, for logs and live views."""

    block: int
    task_id: str
    base_task_id: str
    scores: dict[int, float]
    wall_s: float


class StepLog:
    """The steps' outcomes and metrics, as the loop reports them."""

    def __init__(self, metrics: ValidatorMetrics) -> None:
        self.metrics = metrics
        self.outcomes: deque[StepOutcome] = deque(maxlen=STEP_HISTORY)
        """How each recent step ended, newest last."""
        self.last_step: StepSummary | None = None

    def ended(self, summary: StepSummary | None, started: float) -> None:
        """A step that ran to its end (``started`` by ``time.perf_counter``): settled
        with ``summary``, or idle when it scored nothing."""
        self.metrics.phase.labels("step").observe(time.perf_counter() - started)
        if summary is not None:
            self.metrics.steps.labels(StepOutcome.SETTLED).inc()
            self.last_step = summary
        self.outcomes.append(StepOutcome.SETTLED if summary is not None else StepOutcome.IDLE)

    def failed(self, cause: str) -> None:
        """A step that failed for ``cause``, no miner's or task's: counted, charged to nobody."""
        self.metrics.steps.labels("error").inc()
        self.infrastructure(cause)

    def infrastructure(self, cause: str) -> None:
        """A step (or a head read) lost to a cause no miner or task had."""
        self.metrics.infrastructure_failures.labels(cause).inc()
        self.outcomes.append(StepOutcome.INFRASTRUCTURE)

    def observe(self, result: StepResult, task: Task) -> None:
        """The phases of a step that queried miners, and each miner's outcome."""
        m = self.metrics
        m.phase.labels("query").observe(result.timings.query_s)
        m.phase.labels("execute").observe(result.timings.execute_s)
        m.phase.labels("score").observe(result.timings.score_s)
        for outcome in result.outcomes:
            observe_outcome(m, outcome, task)

    def explain(self, result: StepResult, block: int, tier: str) -> None:
        """One INFO line per miner of a settled step: what it was sent, and S with its
        parts, or why it is 0, or why it is not scored (:meth:`MinerOutcome.explain`)."""
        for outcome in result.outcomes:
            log.info(
                "block %s uid %s task %s (%s tier): %s", block, outcome.uid, result.task_id, tier, outcome.explain()
            )


def observe_outcome(m: ValidatorMetrics, outcome: MinerOutcome, task: Task) -> None:
    execution = outcome.execution
    if outcome.charged:  # an outcome the validator caused is no score (MinerOutcome.charged)
        m.execution_score.labels(task.hint_tier).observe(outcome.score.S)
    if execution is None:
        m.executions.labels("not_run", task.hint_tier).inc()
        if isinstance(outcome.failure, PeerTimeout):
            m.timeouts.labels("query").inc()
        return
    m.executions.labels(execution.status, task.hint_tier).inc()
    if execution.status == RunStatus.BUDGET_ABORT:
        m.budget_aborts.inc()
    m.cost.observe(execution.metrics.cost_tao)
    m.timeouts.labels("node").inc(execution.metrics.timeouts)
    subnets = {node["id"]: node.get("subnet", "") for node in (outcome.plan or {}).get("nodes", [])}
    for node_id, node in execution.nodes.items():
        if node.started_s is not None and node.finished_s is not None:
            m.node_latency.labels(subnets.get(node_id, "unknown")).observe(node.finished_s - node.started_s)
    if task.task_type == "code":
        m.sandbox_runs.labels(_sandbox_outcome(outcome)).inc()


def _sandbox_outcome(outcome: MinerOutcome) -> str:
    quality = outcome.score.details.get("quality", {})
    if "isolation" in quality:
        return "ran"
    return "unavailable" if no_sandbox(outcome.score) else "not_run"
