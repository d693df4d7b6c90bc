"""Feedback after a scored step: each queried miner is told how its own plan ran.

:func:`step_feedback` builds one miner's :class:`~protocol.feedback.StepFeedback`
from its :class:`~validator.validation.MinerOutcome` and nothing else, so no miner is ever
told about another's execution. :class:`FeedbackSender` sends them in the
background: fire and forget, each under a short timeout, a bounded number at once
and a bounded number waiting, after the step has settled. A miner that is down or
refuses costs one failed request and nothing else: its score is settled before the
feedback is built.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from engine.feedback import node_feedback
from protocol.feedback import NodeFeedback, StepFeedback, clip_reason
from protocol.limits import KIB
from protocol.metagraph import Peer
from protocol.plan import WorkflowPlan
from protocol.task import Task

from .client import MinerClient
from .outcome import MinerOutcome, StepResult

log = logging.getLogger(__name__)

FEEDBACK_TIMEOUT_S = 2.0
"""One feedback request, connect to last byte."""
FEEDBACK_CONCURRENCY = 16
"""Feedback requests in flight at once."""
MAX_PENDING = 1024
"""Feedback messages waiting to be sent; past it a step's feedback is dropped (counted)."""
SHUTDOWN_GRACE_S = FEEDBACK_TIMEOUT_S
"""At the loop's end, how long messages in flight may still take before they are cancelled."""
MAX_FEEDBACK_BYTES = 256 * KIB
"""One message's encoded size; a larger one sends the first half of its nodes, then a quarter, …"""

_SCORE_PARTS = ("S", "S_success", "S_cost", "S_latency", "S_reliability", "output_quality", "completion_ratio")


def step_feedback(
    outcome: MinerOutcome, task: Task, *, validator_hotkey: str, block: int, tempo: int | None
) -> StepFeedback:
    """What the validator tells ``outcome``'s miner about its part in the step at ``block``."""
    nodes: list[NodeFeedback] = []
    omitted = 0
    if outcome.execution is not None and outcome.plan is not None:
        nodes, omitted = node_feedback(WorkflowPlan.model_validate(outcome.plan), outcome.execution)
    scored = not outcome.score.details.get("invalid", False)
    message = StepFeedback(
        validator_hotkey=validator_hotkey,
        miner_uid=outcome.uid,
        miner_hotkey=outcome.hotkey,
        block=block,
        tempo=tempo,
        task_id=task.task_id,
        hint_tier=task.hint_tier,
        outcome=_outcome(outcome),
        reason=clip_reason(outcome.reason),
        score={part: getattr(outcome.score, part) for part in _SCORE_PARTS} if scored else {},
        nodes=nodes,
        nodes_omitted=omitted,
    )
    return _fitted(message)


def _outcome(outcome: MinerOutcome) -> str:
    if outcome.execution is not None:
        return outcome.execution.status
    return "no_answer" if outcome.failure is not None else "invalid"


def _fitted(message: StepFeedback) -> StepFeedback:
    """``message`` with as many of its nodes as fit in :data:`MAX_FEEDBACK_BYTES`."""
    while len(message.nodes) > 0 and len(message.model_dump_json()) > MAX_FEEDBACK_BYTES:
        kept = len(message.nodes) // 2
        message = message.model_copy(
            update={
                "nodes": message.nodes[:kept],
                "nodes_omitted": message.nodes_omitted + len(message.nodes) - kept,
            }
        )
    return message


class FeedbackSender:
    """Sends each queried miner its feedback in the background (see the module).

    ``sent``, ``failed`` and ``dropped`` count messages; :meth:`drain` waits for those
    in flight (tests); :meth:`close` ends them before the client closes (the loop's end)."""

    def __init__(
        self,
        client: MinerClient,
        *,
        timeout_s: float = FEEDBACK_TIMEOUT_S,
        concurrency: int = FEEDBACK_CONCURRENCY,
        max_pending: int = MAX_PENDING,
    ) -> None:
        self.client = client
        self.timeout_s = timeout_s
        self.grace_s = SHUTDOWN_GRACE_S
        self.max_pending = max_pending
        self._slots = asyncio.Semaphore(concurrency)
        self._pending: set[asyncio.Task[None]] = set()
        self.sent = self.failed = self.dropped = 0

    def send(self, result: StepResult, task: Task, miners: Sequence[Peer], *, block: int, tempo: int | None) -> None:
        """Start sending every miner of ``result`` its feedback; returns at once."""
        peers = {miner.uid: miner for miner in miners}
        for outcome in result.outcomes:
            peer = peers.get(outcome.uid)
            if peer is None:
                continue
            if len(self._pending) >= self.max_pending:
                self.dropped += 1
                continue
            job = asyncio.ensure_future(self._deliver(peer, outcome, task, block, tempo))
            self._pending.add(job)
            job.add_done_callback(self._pending.discard)

    @property
    def in_flight(self) -> int:
        """Messages started and not yet sent, failed or cancelled."""
        return len(self._pending)

    async def drain(self) -> None:
        """Wait until every message started so far has been sent or has failed."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    async def close(self) -> None:
        """Give the messages in flight ``grace_s`` to finish and cancel the rest (counted
        as failed), so that none is sent while the client closes: a job that started
        during the client's ``aclose`` saw it open and raised httpx's "client has been
        closed" (logged at the end of a localnet)."""
        if not self._pending:
            return
        _, late = await asyncio.wait(list(self._pending), timeout=self.grace_s)
        for job in late:
            job.cancel()
        await asyncio.gather(*late, return_exceptions=True)
        self.failed += len(late)

    async def _deliver(self, peer: Peer, outcome: MinerOutcome, task: Task, block: int, tempo: int | None) -> None:
        async with self._slots:
            if self.client.closed:  # the validator is shutting down
                self.failed += 1
                return
            try:
                message = step_feedback(outcome, task, validator_hotkey=self.client.hotkey, block=block, tempo=tempo)
                reply = await self.client.send_feedback(peer.url, peer.hotkey, message, timeout_s=self.timeout_s)
            except Exception:  # a bug here must cost the feedback, never the loop
                log.exception("feedback to uid %s failed", peer.uid)
                self.failed += 1
                return
        if reply.ok:
            self.sent += 1
        else:
            self.failed += 1
            log.debug("feedback to uid %s not taken: %s", peer.uid, reply.error)
