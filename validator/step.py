"""One validation step: query miners, check their plans, execute them, score them.

The step is a pipeline of three phases, each concurrent across miners:

1. *query* — every miner gets the task package at once through the shared client;
2. *execute* — each valid plan (checked in a worker thread, off the event loop) runs
   on its own node runner (at most ``exec_concurrency`` at a time) on the task's drawn
   instance, under the budget and deadline of :func:`engine.evaluate.run_task`: by
   default the validator's own runner on simulated time in a worker thread
   (:class:`OwnedExecution`), each plan on its share of the step's work and the
   machine's cores least-used plan first, smallest plans first when there are more
   than ``exec_concurrency``, else the configured external adapters on the wall clock;
   what has not finished by the step's deadline (:class:`StepBounds`) is its miner's
   failure;
3. *score* — each execution is scored against the task's reference as soon as it
   ends, beside the executions still running (each distinct final output judged once,
   see :class:`_Scoring`), before the same deadline: each output to judge gets its
   share of the judging slots' time left, and one not judged by its end, or by the
   deadline, is its miners' failure (:data:`~validator.judging.DEADLINE_NOT_JUDGED`).

A miner that hangs, answers garbage, returns an oversize or cyclic plan, or
drops the connection gets :func:`~scoring.evaluate.invalid_score` with the
reason (:attr:`MinerOutcome.reason`), and nothing it does reaches another
miner's outcome. The step itself
never raises for anything a peer does.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from typing import Any

from protocol.canonical import plan_digest
from protocol.limits import DEFAULT_LIMITS, Limits
from protocol.metagraph import Peer
from protocol.response import check_response
from protocol.runner import NodeRunner
from protocol.synapse import TaskPackage, WorkflowSynapse
from protocol.task import Task
from protocol.validation import PlanCheck
from scoring.composite import Score, composite, explain, invalid_score
from scoring.quality.base import output_code
from scoring.quality.code import has_verdict

from .client import MinerClient, Reply
from .errors import PeerError
from .judging import DEADLINE_NOT_JUDGED, NOT_JUDGED, JudgingAllowance, JudgingTime
from engine.evaluate import run_task, score_execution
from engine.executor import Execution, ExecutorConfig
from sandbox import RunStopped, stopping_at
from subnets.holdings import holding
from engine.budget import Cores
from engine.owned import OwnedLimits, run_owned

log = logging.getLogger(__name__)

SIMULATED, WALL = "simulated", "wall"

RunnerFactory = Callable[[TaskPackage, Peer], NodeRunner]
"""Builds the node runner that executes one miner's plan for one task package."""


@dataclass(frozen=True, slots=True)
class OwnedExecution:
    """Plans run by the validator itself on simulated time (engine/owned.py): the
    worker threads they run in, and what one plan may cost."""

    pool: Executor
    limits: OwnedLimits = OwnedLimits()
    cores: Cores = field(default_factory=lambda: Cores(os.cpu_count() or 1))
    """The machine's cores, shared by the plans running at once, least-used plan first."""


@dataclass(frozen=True, slots=True)
class StepBounds:
    """What one step may cost the validator, whatever its miners send.

    ``work_s`` is shared by the miners the step asks: each plan it executes itself gets an
    equal share (never more than :attr:`OwnedLimits.cpu_per_plan_s`), so the sum is bounded
    and no plan can use another's. The share is fixed before any reply is in: what other
    miners send (invalid answers included) neither shrinks nor grows it, and the reference,
    run beside the miners from the step's start, gets exactly the same share
    (``validator.stepping``), so a miner sending the reference's plan runs as it does. ``deadline_s`` counts from the step's start: executions not
    finished by then are settled as their miner's failure (:data:`DEADLINE_REASON`), and
    their remaining work is refused, so they wind down within one attempt.
    """

    work_s: float
    deadline_s: float

    def __post_init__(self) -> None:
        for name in ("work_s", "deadline_s"):
            if not 0 < getattr(self, name) < float("inf"):
                raise ValueError(f"{name} must be a positive number of seconds")

    def share(self, limits: OwnedLimits, plans: int) -> OwnedLimits:
        """``limits`` with one plan's share of :attr:`work_s` among ``plans``."""
        share = self.work_s / max(1, plans)
        return limits if share >= limits.cpu_per_plan_s else replace(limits, cpu_per_plan_s=share)


DEADLINE_REASON = "step deadline: execution unfinished"


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


@dataclass(slots=True)
class _Candidate:
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


async def validation_step(
    *,
    task: Task,
    miners: Sequence[Peer],
    client: MinerClient,
    runner_factory: RunnerFactory,
    executor_config: ExecutorConfig = ExecutorConfig(),
    limits: Limits = DEFAULT_LIMITS,
    exec_concurrency: int = 16,
    owned: OwnedExecution | None = None,
    judging: JudgingAllowance | None = None,
    bounds: StepBounds | None = None,
) -> StepResult:
    """Run one step of ``task`` against ``miners``; one outcome per miner, in order.

    With ``judging``, each miner's new code answers are judged within its allowance
    (:mod:`validator.judging`).

    With ``owned``, the runners ``runner_factory`` builds are the validator's own
    (no I/O): each plan runs on simulated time in ``owned.pool``, off the event loop.
    Without, they run on this loop and the wall clock (external adapters). ``bounds``
    shares the step's work among its plans and sets its deadline (``None``: unbounded).
    """
    started = time.perf_counter()
    until = None if bounds is None else time.monotonic() + bounds.deadline_s  # the sandbox's clock
    own_before = client.own_s
    package = task.package()

    replies = await asyncio.gather(*(client.query_workflow(m.url, m.hotkey, package) for m in miners))
    queried = time.perf_counter()
    admitted = await asyncio.to_thread(
        lambda: [_admit(miner, reply, package, limits) for miner, reply in zip(miners, replies)]
    )  # checking a 1 MiB plan takes a third of a second: never on the event loop
    candidates = [entry for entry in admitted if isinstance(entry, _Candidate)]

    if owned is not None and bounds is not None:  # per miner asked, as the reference beside them is given
        owned = replace(owned, limits=bounds.share(owned.limits, len(miners)))
    slots = asyncio.Semaphore(max(1, exec_concurrency))
    queue = sorted(candidates, key=lambda c: c.size)  # the slots go to small plans first: a big one waits
    scoring, ends = _Scoring(task, judging, until, len(queue)), []
    jobs = [
        asyncio.ensure_future(_execute_and_score(
            c, scoring, ends, task, package, runner_factory, executor_config, limits, slots, owned))
        for c in queue
    ]
    if jobs:
        left = None if bounds is None else max(0.0, bounds.deadline_s - (time.perf_counter() - started))
        _, unfinished = await asyncio.wait(jobs, timeout=left)
        for job in unfinished:
            job.cancel()
    scoring.close()
    _settle_unfinished(queue)
    finished = time.perf_counter()
    executed = finished if len(ends) < len(queue) else max(ends, default=queried)

    clock = WALL if owned is None else SIMULATED
    outcomes = [_outcome(m, entry, reply, clock) for m, entry, reply in zip(miners, admitted, replies)]
    timings = StepTimings(
        wall_s=finished - started, query_s=queried - started, execute_s=executed - queried,
        score_s=finished - executed, client_own_s=client.own_s - own_before,
    )
    return StepResult(task_id=package.task_id, outcomes=outcomes, timings=timings)


def _settle_unfinished(candidates: Sequence[_Candidate]) -> None:
    """At the deadline: each unfinished execution, and each answer not yet judged, is its
    miner's failure; an execution's remaining work is refused (a thread cannot be stopped,
    but it winds down within one attempt), a judgement's sandboxed run was stopped at the
    end of its share of the time, no later than now."""
    for candidate in candidates:
        if candidate.execution is None and candidate.failure is None:
            candidate.closed.set()
            candidate.failure = DEADLINE_REASON
        elif candidate.score is None and candidate.failure is None:
            candidate.failure = DEADLINE_NOT_JUDGED


def _admit(miner: Peer, reply: Reply, package: TaskPackage, limits: Limits) -> _Candidate | str:
    """A candidate for execution, or the reason the miner's answer is invalid.

    Each miner is admitted on its own: whatever its reply makes the checks raise
    costs that miner its score and nobody else anything.
    """
    try:
        return _checked(miner, reply, package, limits)
    except Exception as exc:
        log.exception("checking the reply of uid %s failed", miner.uid)
        return f"response check failed: {type(exc).__name__}: {exc}"[:300]


def _checked(miner: Peer, reply: Reply, package: TaskPackage, limits: Limits) -> _Candidate | str:
    if not reply.ok:
        return f"query failed: {reply.error}"
    checked = check_response(reply.body or b"", package, limits=limits)
    if not checked.ok or checked.synapse is None or checked.plan_check is None:
        return checked.reason or "invalid response"
    plan = checked.synapse.workflow_plan
    return _Candidate(miner, checked.synapse, checked.plan_check, len(reply.body or b""), plan_digest(plan))


def _outcome(miner: Peer, entry: _Candidate | str, reply: Reply, clock: str) -> MinerOutcome:
    if isinstance(entry, str):
        return MinerOutcome(
            miner.uid, miner.hotkey, invalid_score(entry), entry, None, reply.elapsed_s, clock=clock, failure=reply.error
        )
    plan = entry.synapse.workflow_plan.model_dump(mode="json", by_alias=True, exclude_none=True)
    if entry.score is None:
        reason = entry.failure or "not scored"
        return MinerOutcome(
            miner.uid, miner.hotkey, invalid_score(reason), reason, entry.execution, reply.elapsed_s, plan, clock,
            digest=entry.digest,
        )
    return MinerOutcome(
        miner.uid, miner.hotkey, entry.score, None, entry.execution, reply.elapsed_s, plan, clock, digest=entry.digest)


async def _execute_and_score(
    candidate: _Candidate, scoring: _Scoring, ends: list[float], task: Task, *execution: Any
) -> None:
    """Execute ``candidate``'s plan, then score it at once, beside the executions still
    running: an answer waits for no other miner's execution to be judged."""
    await _execute(candidate, task, *execution)
    ends.append(time.perf_counter())
    if candidate.failure is None:
        await scoring.score(candidate)
    else:
        scoring.skip()


async def _execute(
    candidate: _Candidate,
    task: Task,
    package: TaskPackage,
    runner_factory: RunnerFactory,
    config: ExecutorConfig,
    limits: Limits,
    slots: asyncio.Semaphore,
    owned: OwnedExecution | None,
) -> None:
    synapse = candidate.synapse
    runner = holding(runner_factory(package, candidate.miner), task.holdings)  # providers get data, never ids
    async with slots:
        try:
            if owned is None:
                candidate.execution = await run_task(
                    synapse.workflow_plan, candidate.check, task, runner,
                    total_estimated_cost=synapse.total_estimated_cost, config=config, limits=limits,
                )
            else:
                candidate.execution = await asyncio.get_running_loop().run_in_executor(owned.pool, functools.partial(
                    run_owned, synapse.workflow_plan, candidate.check, task, runner,
                    total_estimated_cost=synapse.total_estimated_cost, config=config, limits=limits, owned=owned.limits,
                    closed=candidate.closed, cores=owned.cores,
                ))
        except Exception as exc:  # an engine bug must cost this miner its score, not the step
            log.exception("execution of uid %s failed", candidate.miner.uid)
            candidate.failure = f"execution error: {type(exc).__name__}: {exc}"[:300]


JUDGING_SLOTS = os.cpu_count() or 1
"""Distinct outputs judged at once: one per core, so a sandboxed call gets about a core and
its wall time stays near its CPU time, far inside the judge's wall-clock net."""


async def _score_all(task: Task, candidates: Sequence[_Candidate], judging: JudgingAllowance | None = None) -> None:
    """Score every candidate at once, as a step without a deadline does (:class:`_Scoring`)."""
    scoring = _Scoring(task, judging, None, len(candidates))
    await asyncio.gather(*(scoring.score(candidate) for candidate in candidates))
    scoring.close()


@dataclass(slots=True)
class _Judgement:
    """One distinct output's judgement and the candidates that sent that output."""

    judged: _Candidate
    """The candidate whose execution is scored; the others get the composite of their own
    metrics on its output quality, exactly as :func:`score_run` would compute it."""
    members: list[_Candidate]
    charged: bool
    """Whether it runs the code judge (so costs judging allowance to each member with some left)."""
    outcome: Score | str | None = None
    """The judged candidate's score, or why none of them is scored; ``None`` while it runs."""

    def join(self, candidate: _Candidate, task: Task) -> None:
        self.members.append(candidate)
        if self.outcome is not None:
            _settle(task, self.judged, [candidate], self.outcome)

    def settle(self, task: Task, outcome: Score | str) -> None:
        self.outcome = outcome
        _settle(task, self.judged, self.members, outcome)


class _Scoring:
    """The step's scoring: each candidate scored as soon as its execution ends, each
    distinct final output judged once.

    Output quality depends on the task and the final output alone (for ``code``, on its
    code alone), and judging a ``code`` output runs it in the sandbox under a CPU budget
    (docs/scoring.md); miners running the same strategy produce the same output, so one
    judgement per distinct output keeps a large step inside a block. A code answer still
    to be judged is judged while one of its senders has judging allowance left
    (:mod:`validator.judging`); one none of them has is :data:`NOT_JUDGED` at
    :meth:`close`. With ``until`` (the step's deadline, ``time.monotonic()``), each
    judgement runs within its share of the judging slots' time left
    (:class:`~validator.judging.JudgingTime`): past it, its answer is its senders'
    failure :data:`DEADLINE_NOT_JUDGED`. Used from the event loop only.
    """

    def __init__(self, task: Task, judging: JudgingAllowance | None, until: float | None, answers: int) -> None:
        self.task = task
        self.judging = judging
        self.slots = asyncio.Semaphore(JUDGING_SLOTS)
        self.shares = None if until is None else JudgingTime(until, JUDGING_SLOTS, answers)
        self.judgements: dict[str, _Judgement] = {}
        self.waiting: dict[str, list[_Candidate]] = {}
        """Code answers none of whose senders so far had judging allowance left."""

    async def score(self, candidate: _Candidate) -> None:
        key = _output_key(self.task, candidate.execution.final_output)
        judgement = self.judgements.get(key)
        if judgement is not None:
            if judgement.charged and self.judging is not None:
                self.judging.take([candidate.miner.uid])
            self.skip()
            judgement.join(candidate, self.task)
            return
        charged = self._charged(candidate)
        if charged and not self.judging.take([candidate.miner.uid]):
            self.waiting.setdefault(key, []).append(candidate)
            self.skip()
            return
        judgement = _Judgement(candidate, [*self.waiting.pop(key, []), candidate], charged)
        self.judgements[key] = judgement
        judgement.settle(self.task, await self._judged(candidate))

    def skip(self) -> None:
        """One candidate fewer to judge: its execution failed, or another's judgement serves it."""
        if self.shares is not None:
            self.shares.skip()

    def close(self) -> None:
        """The step is over: answers still waiting for allowance are :data:`NOT_JUDGED`."""
        for group in self.waiting.values():
            for candidate in group:
                candidate.failure = NOT_JUDGED
        self.waiting.clear()

    def _charged(self, candidate: _Candidate) -> bool:
        """Whether scoring ``candidate`` runs the code judge, so costs judging allowance."""
        return (
            self.judging is not None and self.task.task_type == "code"
            and not has_verdict(self.task.reference, candidate.execution.final_output)
        )

    async def _judged(self, candidate: _Candidate) -> Score | str:
        async with self.slots:
            if self.shares is None:
                return await asyncio.to_thread(_score_one, self.task, candidate)
            with stopping_at(self.shares.start(time.monotonic())):  # the worker thread's runs inherit it
                return await asyncio.to_thread(_score_one, self.task, candidate)


def _settle(task: Task, judged: _Candidate, members: Sequence[_Candidate], outcome: Score | str) -> None:
    """Give each of ``members`` its score on ``judged``'s ``outcome``, or the reason it has none."""
    for candidate in members:
        if isinstance(outcome, str):
            candidate.failure = outcome
        elif candidate is judged:
            candidate.score = outcome
        else:
            candidate.score = _own_score(task, outcome, candidate.execution)


def _output_key(task: Task, final_output: dict[str, Any] | None) -> str:
    """What the output's quality depends on: a ``code`` output's code, any other output whole."""
    if task.task_type == "code":
        return "code:" + output_code(final_output)
    return json.dumps(final_output, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)


def _score_one(task: Task, candidate: _Candidate) -> Score | str:
    """``candidate``'s score, or why it has none. Runs in a worker thread (the code scorer
    waits on a sandboxed subprocess) and only returns: what a step's deadline abandons
    changes nothing."""
    try:
        return score_execution(task, candidate.check, candidate.execution)
    except RunStopped:
        return DEADLINE_NOT_JUDGED
    except Exception as exc:  # a scorer bug must cost these miners their score, not the step
        log.exception("scoring uid %s failed", candidate.miner.uid)
        return f"scoring error: {type(exc).__name__}: {exc}"[:300]


def _own_score(task: Task, judged: Score, execution: Execution) -> Score:
    """The composite of ``execution``'s own metrics on the output quality ``judged`` found."""
    own = composite(
        output_quality=judged.output_quality, metrics=execution.metrics,
        max_budget_tao=task.constraints.max_budget_tao, max_latency_seconds=task.constraints.max_latency_seconds,
    )
    return own.model_copy(update={"details": {**judged.details, **own.details}})
