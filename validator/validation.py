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
   see :class:`Scoring`), before the same deadline: each output to judge gets its
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
import logging
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from typing import Any

from engine.budget import Cores
from engine.evaluate import run_task
from engine.executor import ExecutorConfig
from engine.owned import OwnedLimits, run_owned
from protocol.canonical import plan_digest
from protocol.limits import DEFAULT_LIMITS, Limits
from protocol.metagraph import Peer
from protocol.response import check_response
from protocol.runner import NodeRunner
from protocol.synapse import TaskPackage
from protocol.task import Task
from scoring.composite import invalid_score
from subnets.holdings import holding

from .client import MinerClient, Reply
from .draws import Program
from .judging import DEADLINE_NOT_JUDGED, JudgingAllowance, Scoring
from .outcome import SIMULATED, WALL, Candidate, MinerOutcome, StepResult, StepTimings

log = logging.getLogger(__name__)


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
    (``validator.stepper``), so a miner sending the reference's plan runs as it does. ``deadline_s`` counts from the step's start: executions not
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
    candidates = [entry for entry in admitted if isinstance(entry, Candidate)]

    if owned is not None and bounds is not None:  # per miner asked, as the reference beside them is given
        owned = replace(owned, limits=bounds.share(owned.limits, len(miners)))
    slots = asyncio.Semaphore(max(1, exec_concurrency))
    queue = sorted(candidates, key=lambda c: c.size)  # the slots go to small plans first: a big one waits
    scoring, ends = Scoring(task, judging, until, len(queue)), list[float]()
    jobs = [
        asyncio.ensure_future(
            _execute_and_score(c, scoring, ends, task, package, runner_factory, executor_config, limits, slots, owned)
        )
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
        wall_s=finished - started,
        query_s=queried - started,
        execute_s=executed - queried,
        score_s=finished - executed,
        client_own_s=client.own_s - own_before,
    )
    return StepResult(task_id=package.task_id, outcomes=outcomes, timings=timings)


def _settle_unfinished(candidates: Sequence[Candidate]) -> None:
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


def _admit(miner: Peer, reply: Reply, package: TaskPackage, limits: Limits) -> Candidate | str:
    """A candidate for execution, or the reason the miner's answer is invalid.

    Each miner is admitted on its own: whatever its reply makes the checks raise
    costs that miner its score and nobody else anything.
    """
    try:
        return _checked(miner, reply, package, limits)
    except Exception as exc:
        log.exception("checking the reply of uid %s failed", miner.uid)
        return f"response check failed: {type(exc).__name__}: {exc}"[:300]


def _checked(miner: Peer, reply: Reply, package: TaskPackage, limits: Limits) -> Candidate | str:
    if not reply.ok:
        return f"query failed: {reply.error}"
    checked = check_response(reply.body or b"", package, limits=limits)
    if not checked.ok or checked.synapse is None or checked.plan_check is None:
        return checked.reason or "invalid response"
    candidate = Candidate(miner, checked.synapse, checked.plan_check, len(reply.body or b""))
    candidate.digest = plan_digest(candidate.plan)
    return candidate


def _outcome(miner: Peer, entry: Candidate | str, reply: Reply, clock: str) -> MinerOutcome:
    if isinstance(entry, str):
        return MinerOutcome(
            miner.uid,
            miner.hotkey,
            invalid_score(entry),
            entry,
            None,
            reply.elapsed_s,
            clock=clock,
            failure=reply.error,
        )
    plan = entry.plan.model_dump(mode="json", by_alias=True, exclude_none=True)
    if entry.score is None:
        reason = entry.failure or "not scored"
        return MinerOutcome(
            miner.uid,
            miner.hotkey,
            invalid_score(reason),
            reason,
            entry.execution,
            reply.elapsed_s,
            plan,
            clock,
            digest=entry.digest,
        )
    program = Program(entry.plan, entry.check, entry.synapse.total_estimated_cost)
    return MinerOutcome(
        miner.uid,
        miner.hotkey,
        entry.score,
        None,
        entry.execution,
        reply.elapsed_s,
        plan,
        clock,
        digest=entry.digest,
        program=program,
    )


async def _execute_and_score(
    candidate: Candidate, scoring: Scoring, ends: list[float], task: Task, *execution: Any
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
    candidate: Candidate,
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
                    candidate.plan,
                    candidate.check,
                    task,
                    runner,
                    total_estimated_cost=synapse.total_estimated_cost,
                    config=config,
                    limits=limits,
                )
            else:
                candidate.execution = await asyncio.get_running_loop().run_in_executor(
                    owned.pool,
                    functools.partial(
                        run_owned,
                        candidate.plan,
                        candidate.check,
                        task,
                        runner,
                        total_estimated_cost=synapse.total_estimated_cost,
                        config=config,
                        limits=limits,
                        owned=owned.limits,
                        closed=candidate.closed,
                        cores=owned.cores,
                    ),
                )
        except Exception as exc:  # an engine bug must cost this miner its score, not the step
            log.exception("execution of uid %s failed", candidate.miner.uid)
            candidate.failure = f"execution error: {type(exc).__name__}: {exc}"[:300]
