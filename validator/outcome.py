"""What one validation step produces: a candidate (a miner whose answer passed the checks)
on its way through execution and judging, and each miner's outcome with the step's timings."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.executor import Execution
from protocol.metagraph import Peer
from protocol.plan import WorkflowPlan
from protocol.synapse import WorkflowSynapse
from protocol.validation import PlanCheck
from scoring.composite import Score, explain

from .draws import Program
from .errors import PeerError
from .state.records import ExecutionRecord

if TYPE_CHECKING:
    from protocol.task import Task
    from scoring.margin import Credit
    from subnets.world import World

    from .sampling import TaskDraw

SIMULATED, WALL = "simulated", "wall"


@dataclass(slots=True)
class Candidate:
    """A miner whose response passed the checks, on its way through execution."""

    miner: Peer
    synapse: WorkflowSynapse
    check: PlanCheck
    size: int = 0
    """The reply's bytes."""
    digest: str | None = None
    execution: Execution | None = None
    failure: str | None = None
    score: Score | None = None
    closed: threading.Event = field(default_factory=threading.Event)
    """Set at the step's deadline: the execution's remaining work is refused."""

    @property
    def plan(self) -> WorkflowPlan:
        """The answer's plan: a response passes the checks only with one."""
        assert self.synapse.workflow_plan is not None
        return self.synapse.workflow_plan

    @property
    def executed(self) -> Execution:
        """The execution, once it has run to its end (scoring sees no other)."""
        assert self.execution is not None
        return self.execution


@dataclass(frozen=True, slots=True)
class MinerOutcome:
    """How one miner fared: its score, why it scored 0 if it did, what its plan did."""

    uid: int
    hotkey: str
    score: Score
    reason: str | None
    execution: Execution | None
    reply_s: float
    plan: dict[str, Any] | None = None
    """The plan the miner answered with, as JSON, when it passed the checks."""
    clock: str = WALL
    """What the execution's times were measured on: :data:`SIMULATED` (owned execution)
    or :data:`WALL` (external adapters)."""
    failure: PeerError | None = None
    """Why no answer came from the miner, when none did (``reason`` is its message)."""
    digest: str | None = None
    """The plan's canonical digest (:func:`protocol.canonical.plan_digest`) when it passed
    the checks: copies of one program share it whatever their node names and order."""
    program: Program | None = None
    """The answer as it ran, when it was scored: what :mod:`validator.draws` runs again."""

    @property
    def program_key(self) -> tuple[str | None, float | None] | None:
        """The key answers that run alike share (canonical digest, declared cost); ``None``
        unless scored."""
        return None if self.program is None else (self.digest, self.program.total_estimated_cost)

    @property
    def charged(self) -> bool:
        """Whether the outcome is the miner's to answer for: not when the validator caused
        it (:attr:`~validator.errors.PeerError.ours`, e.g. a miner refusing a validator with
        no permit); such an outcome is not scored and enters no window."""
        return self.failure is None or not self.failure.ours

    def explain(self) -> str:
        """One line: S and its parts, why it is 0, or why the outcome is not scored."""
        if not self.charged:
            return f"not scored (the validator's, not the miner's): {self.reason}"
        return explain(self.score, self.reason)

    def summary(self) -> dict[str, Any] | None:
        """The execution's status and metrics as plain JSON, or ``None`` when it never ran."""
        if self.execution is None:
            return None
        metrics = self.execution.metrics
        return {
            "status": self.execution.status,
            "completion_ratio": metrics.completion_ratio,
            "latency_s": metrics.latency_s,
            "cost_tao": metrics.cost_tao,
            "retries": metrics.retries,
            "unplanned_retries": metrics.unplanned_retries,
            "timeouts": metrics.timeouts,
            "hard_failures": metrics.hard_failures,
            "budget_ceiling": self.execution.budget_ceiling,
            "clock": self.clock,
        }


@dataclass(frozen=True, slots=True)
class StepTimings:
    """Wall-clock seconds of the step and of each phase.

    Scoring runs beside execution (each answer as soon as its execution ends):
    ``execute_s`` lasts until the last execution ended (or the deadline settled it),
    ``score_s`` is the scoring that went on after.

    ``client_own_s`` is the time the client itself spent signing, encoding and
    collecting bodies over the whole step (queries and node calls), as opposed
    to waiting on peers.
    """

    wall_s: float
    query_s: float
    execute_s: float
    score_s: float
    client_own_s: float


@dataclass(frozen=True, slots=True)
class StepResult:
    task_id: str
    outcomes: list[MinerOutcome]
    timings: StepTimings

    def scores(self) -> dict[int, float]:
        """``uid -> S`` for every miner whose outcome is scored (:attr:`MinerOutcome.charged`)."""
        return {outcome.uid: outcome.score.S for outcome in self.outcomes if outcome.charged}


def execution_record(
    block: int,
    task: Task,
    draw: TaskDraw,
    outcome: MinerOutcome,
    world: World | None = None,
    reference_s: float | None = None,
    credit: Credit | None = None,
    *,
    draws: int = 1,
    drawn_s: float | None = None,
) -> ExecutionRecord:
    """What the state keeps of one miner's part in the step at ``block``: ``task`` as
    sent, the ``draw`` it came from (:mod:`validator.audit`), the tempo of the ``world``
    it ran in, its margin over ``reference_s`` and the ``credit`` it earned, both over
    ``draws`` draws of the world (``drawn_s``: its mean ``S`` over them, when it was drawn)."""
    execution = outcome.execution
    paid = outcome.score.S if drawn_s is None else drawn_s
    margin = None if reference_s is None else paid - reference_s
    return ExecutionRecord(
        block=block,
        uid=outcome.uid,
        hotkey=outcome.hotkey,
        task_id=task.task_id,
        base_task_id=draw.base.task_id,
        instance_seed=draw.seed,
        synthetic=draw.synthetic,
        hint_tier=draw.tier,
        drawn_tempo=draw.drawn_tempo,
        world_tempo=None if world is None else world.tempo,
        plan=outcome.plan,
        metrics=outcome.summary(),
        final_output=None if execution is None else execution.final_output,
        score=outcome.score.model_dump(mode="json"),
        reason=outcome.reason,
        reference_S=reference_s,
        margin=margin,
        credit=None if credit is None else credit.margin,
        share=None if credit is None else credit.share,
        digest=outcome.digest,
        draws=draws,
        drawn_S=drawn_s,
    )
