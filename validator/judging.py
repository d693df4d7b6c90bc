"""How many code answers of one miner the validator judges per tempo.

Judging a ``code`` answer runs it in the sandbox (up to ``scoring.quality.code.JUDGING``:
3 s of CPU, about 18 s of wall time at worst). Verdicts are kept by (code, reference)
whatever they are, so an answer sent again costs nothing; what is left to bound is a miner
sending new answers. Each miner may have :data:`JUDGINGS_PER_TEMPO` answers judged per
tempo; an answer past it is not judged that tempo, and the miner's outcome for the step
is the failure :data:`NOT_JUDGED` (score 0, like any answer that could not be scored).
An answer several miners sent is judged once and charged to each of them with allowance
left; it is judged as long as one of them has some.

Judging also shares the step's deadline with execution (:class:`JudgingTime`): each
answer to judge reserves, as it starts, an equal share of the judging slots' time left
before the deadline, and its sandboxed runs are stopped at the end of that share; an
answer not judged by then is its miners' failure :data:`DEADLINE_NOT_JUDGED` (score 0,
no verdict kept, so it can be judged in a later step within the allowance). So a step's
judging costs at most its slots' time until the deadline, whatever its miners send.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.evaluate import score_execution
from engine.executor import Execution
from protocol.task import Task
from sandbox import RunStopped, stopping_at
from scoring.composite import Score, composite
from scoring.quality.base import output_code
from scoring.quality.code import has_verdict

from .outcome import Candidate

log = logging.getLogger(__name__)

JUDGINGS_PER_TEMPO = 16
"""Code answers judged per miner per tempo (an honest miner sends one per code step)."""
NOT_JUDGED = "not judged: judging allowance for this tempo spent"
DEADLINE_NOT_JUDGED = "step deadline: answer not judged within its share of the time left"


class JudgingAllowance:
    """Judgements charged per miner in the current period (a tempo; a step where the
    tempo is not read). Used from the event loop only."""

    def __init__(self, per_miner: int = JUDGINGS_PER_TEMPO) -> None:
        self.per_miner = per_miner
        self._period: tuple[str, int] | None = None
        self._used: Counter[int] = Counter()

    def for_step(self, block: int, tempo: int | None) -> JudgingAllowance:
        """This allowance for the step at ``block`` in tempo number ``tempo``, every miner's
        count restarted when the period is a new one: the tempo, or the step itself when the
        tempo is not read (``None``)."""
        period = ("block", block) if tempo is None else ("tempo", tempo)
        if period != self._period:
            self._period = period
            self._used.clear()
        return self

    def take(self, uids: Iterable[int]) -> bool:
        """Charge one judgement to each of ``uids`` that has allowance left; False when none has."""
        left = [uid for uid in uids if self._used[uid] < self.per_miner]
        self._used.update(left)
        return bool(left)


class JudgingTime:
    """The judging slots' time until the step's deadline ``until`` (``time.monotonic()``),
    shared equally by the answers still to judge.

    The answers not yet started go through the slots in turns, ``slots`` at a time; the
    one starting now gets the time left divided by the turns they need,
    ``⌈answers not yet started ÷ slots⌉``, never past ``until``. However many answers
    there are and in whatever order they start, each gets at least an equal share of
    a slot's time, the last ones included, and time an answer leaves unused goes to
    those after it. Used from the event loop only.
    """

    def __init__(self, until: float, slots: int, answers: int) -> None:
        self.until = until
        self.slots = slots
        self._waiting = answers

    def start(self, now: float) -> float:
        """The time by which the answer starting ``now`` must be judged (its share's end)."""
        turns = max(1, -(-self._waiting // self.slots))
        self._waiting -= 1
        return now + max(0.0, self.until - now) / turns

    def skip(self) -> None:
        """One answer fewer to judge (its execution failed, or another's judgement serves it)."""
        self._waiting -= 1


JUDGING_SLOTS = os.cpu_count() or 1
"""Distinct outputs judged at once: one per core, so a sandboxed call gets about a core and
its wall time stays near its CPU time, far inside the judge's wall-clock net."""


async def score_all(task: Task, candidates: Sequence[Candidate], judging: JudgingAllowance | None = None) -> None:
    """Score every candidate at once, as a step without a deadline does (:class:`Scoring`)."""
    scoring = Scoring(task, judging, None, len(candidates))
    await asyncio.gather(*(scoring.score(candidate) for candidate in candidates))
    scoring.close()


@dataclass(slots=True)
class Judgement:
    """One distinct output's judgement and the candidates that sent that output."""

    judged: Candidate
    """The candidate whose execution is scored; the others get the composite of their own
    metrics on its output quality, exactly as :func:`score_run` would compute it."""
    members: list[Candidate]
    charged: bool
    """Whether it runs the code judge (so costs judging allowance to each member with some left)."""
    outcome: Score | str | None = None
    """The judged candidate's score, or why none of them is scored; ``None`` while it runs."""

    def join(self, candidate: Candidate, task: Task) -> None:
        self.members.append(candidate)
        if self.outcome is not None:
            _settle(task, self.judged, [candidate], self.outcome)

    def settle(self, task: Task, outcome: Score | str) -> None:
        self.outcome = outcome
        _settle(task, self.judged, self.members, outcome)


class Scoring:
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
        self.judgements: dict[str, Judgement] = {}
        self.waiting: dict[str, list[Candidate]] = {}
        """Code answers none of whose senders so far had judging allowance left."""

    async def score(self, candidate: Candidate) -> None:
        key = _output_key(self.task, candidate.executed.final_output)
        judgement = self.judgements.get(key)
        if judgement is not None:
            if judgement.charged and self.judging is not None:
                self.judging.take([candidate.miner.uid])
            self.skip()
            judgement.join(candidate, self.task)
            return
        charged = self._charged(candidate)
        if charged and self.judging is not None and not self.judging.take([candidate.miner.uid]):
            self.waiting.setdefault(key, []).append(candidate)
            self.skip()
            return
        judgement = Judgement(candidate, [*self.waiting.pop(key, []), candidate], charged)
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

    def _charged(self, candidate: Candidate) -> bool:
        """Whether scoring ``candidate`` runs the code judge, so costs judging allowance."""
        return (
            self.judging is not None
            and self.task.task_type == "code"
            and not has_verdict(self.task.reference, candidate.executed.final_output)
        )

    async def _judged(self, candidate: Candidate) -> Score | str:
        async with self.slots:
            if self.shares is None:
                return await asyncio.to_thread(_score_one, self.task, candidate)
            with stopping_at(self.shares.start(time.monotonic())):  # the worker thread's runs inherit it
                return await asyncio.to_thread(_score_one, self.task, candidate)


def _settle(task: Task, judged: Candidate, members: Sequence[Candidate], outcome: Score | str) -> None:
    """Give each of ``members`` its score on ``judged``'s ``outcome``, or the reason it has none."""
    for candidate in members:
        if isinstance(outcome, str):
            candidate.failure = outcome
        elif candidate is judged:
            candidate.score = outcome
        else:
            candidate.score = _own_score(task, outcome, candidate.executed)


def _output_key(task: Task, final_output: dict[str, Any] | None) -> str:
    """What the output's quality depends on: a ``code`` output's code, any other output whole."""
    if task.task_type == "code":
        return "code:" + output_code(final_output)
    return json.dumps(final_output, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)


def _score_one(task: Task, candidate: Candidate) -> Score | str:
    """``candidate``'s score, or why it has none. Runs in a worker thread (the code scorer
    waits on a sandboxed subprocess) and only returns: what a step's deadline abandons
    changes nothing."""
    try:
        return score_execution(task, candidate.check, candidate.executed)
    except RunStopped:
        return DEADLINE_NOT_JUDGED
    except Exception as exc:  # a scorer bug must cost these miners their score, not the step
        log.exception("scoring uid %s failed", candidate.miner.uid)
        return f"scoring error: {type(exc).__name__}: {exc}"[:300]


def _own_score(task: Task, judged: Score, execution: Execution) -> Score:
    """The composite of ``execution``'s own metrics on the output quality ``judged`` found."""
    own = composite(
        output_quality=judged.output_quality,
        metrics=execution.metrics,
        max_budget_tao=task.constraints.max_budget_tao,
        max_latency_seconds=task.constraints.max_latency_seconds,
    )
    return own.model_copy(update={"details": {**judged.details, **own.details}})
