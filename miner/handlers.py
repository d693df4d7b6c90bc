"""The miner's routes: plan a task, serve one node, report health and metrics.

By the time a handler runs, the layers around it have read the body (``scope[BODY]``),
verified the signature, checked the blacklist, the rate limit and taken a
concurrency slot. Handlers parse that same body straight into the wire models
and answer with JSON bytes, skipping FastAPI's generic encoders.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import replace
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from planners.base import PLANNER_INTERFACE, PLANNER_TIMEOUT_S, PlannerFailure, answer_for
from protocol.actions import is_generator
from protocol.errors import format_validation_error
from protocol.feedback import StepFeedback
from protocol.output import NodeOutput
from protocol.routes import error_body
from protocol.runner import ERROR_MAX_CHARS, NodeCall, NodeResult
from protocol.synapse import SCORING_VERSION, NodeResponse, NodeSynapse, TaskPackage, WorkflowSynapse
from protocol.version import package_version
from subnets.runner import LocalRunner

from .asgi import BODY, caller_hotkey
from .feedback import FeedbackInbox, block_refusal
from .metagraph import MetagraphSource
from .prometheus import MinerMetrics
from .querylog import PACKAGE, logged_query
from .quota import PlanningQuota, QuotaExceeded
from .readiness import readiness
from .serving import ToolMenu
from .workers import PlannerWorkers

_M = TypeVar("_M", bound=BaseModel)

log = logging.getLogger("dagnet.miner")

_JSON = "application/json"
_MAX_ERRORS_LISTED = 20
MAX_FRAMES = 10_000
"""The most frames one generator call answers with; the tool stops at the next one."""

PLANNER_FAILURES = {
    "unplannable": (422, "unplannable"),
    "error": (500, "planner_error"),
    "timeout": (503, "planner_timeout"),
    "invalid": (500, "planner_invalid"),
}
"""Per failure kind (:class:`~planners.base.PlannerFailure`): the status and the
``reason`` the miner answers with; the message is the failure's own."""


class MinerEndpoints:
    """The route handlers and what they share: this miner's identity,
    its metagraph, its planner and its tool runner."""

    def __init__(
        self,
        *,
        hotkey: str,
        metagraph: MetagraphSource,
        planning: PlannerWorkers,
        quota: PlanningQuota,
        runner: LocalRunner,
        menu: ToolMenu,
        metrics: MinerMetrics,
        inbox: FeedbackInbox,
        planner_timeout_s: float = PLANNER_TIMEOUT_S,
    ) -> None:
        self.hotkey = hotkey
        self.inbox = inbox
        self.metagraph = metagraph
        self.planning = planning
        self.quota = quota
        self.planner_timeout_s = planner_timeout_s
        self.runner = runner
        self.menu = menu
        self.metrics = metrics
        self.version = package_version()

    @logged_query
    async def workflow(self, request: Request) -> Response:
        """``POST /WorkflowSynapse``: the task package back with a plan and the miner fields.

        The planner runs in a planning process under the planning deadline
        (:mod:`miner.workers`), within the caller's quota (:mod:`miner.quota`:
        429 ``planner_busy`` or ``planning_allowance`` past it); whatever it does wrong
        is answered with :data:`PLANNER_FAILURES` and costs this query only.
        """
        synapse = await _parse(request, WorkflowSynapse)
        if isinstance(synapse, Response):
            return synapse
        state = readiness(self.metagraph.snapshot(), self.hotkey, self.metagraph.problem())
        if state.uid is None:  # not ready (a uid once registered), state.reason says why
            return _error(503, "miner_not_registered", f"this miner is not ready: {state.reason}")
        try:
            async with self.quota.admit(caller_hotkey(request.scope) or "") as charge:
                outcome, cpu_s = await self.planning.plan(synapse, timeout_s=self.planner_timeout_s)
                charge(cpu_s)
        except QuotaExceeded as refused:
            return _error(
                429,
                refused.reason,
                str(refused),
                headers={"retry-after": f"{refused.retry_after_s:.0f}"},
                retry_after_s=refused.retry_after_s,
            )
        try:
            if isinstance(outcome, PlannerFailure):
                raise outcome
            answer = answer_for(outcome, synapse, state.uid)
            body = answer.model_dump_json(by_alias=True, exclude_none=True)
        except PlannerFailure as failure:
            return self._planner_failed(failure, synapse)
        return _json(body)

    def _planner_failed(self, failure: PlannerFailure, package: TaskPackage) -> Response:
        self.metrics.planner_failure(failure.kind)
        status, reason = PLANNER_FAILURES[failure.kind]
        if failure.kind != "unplannable":
            log.warning(
                "planner %s: %s on task %s: %s%s",
                self.planning.name,
                failure.kind,
                package.task_id,
                failure.reason,
                f"\n{failure.traceback.rstrip()}" if failure.traceback else "",
            )
        return _error(status, reason, failure.reason)

    async def node(self, request: Request) -> Response:
        """``POST /NodeSynapse``: run one already-resolved node on the local tools.

        The miner acts as the partner subnet's tool provider: params are used
        as sent (DataRefs are the validator's business, never resolved here)
        and the tool is bounded by the request's ``timeout_seconds``. A generator
        action answers with all its frames in this one response (``frames``), also
        those made before a failure. A subnet and action the operator did not name
        (:mod:`miner.serving`) is 404 ``not_served``.
        """
        synapse = await _parse(request, NodeSynapse)
        if isinstance(synapse, Response):
            return synapse
        call = synapse.call()
        refusal = await self.menu.refusal(call.subnet, call.action)
        if refusal is not None:
            return _error(404, "not_served", refusal)
        frames: list[NodeOutput] | None = [] if is_generator(call.action) else None
        result, outcome = await self._run(call, frames)
        self.metrics.node_call(call.action, outcome)
        error = result.error[:ERROR_MAX_CHARS] if result.error is not None else None
        response = NodeResponse.of(replace(result, frames=frames, error=error))
        return _json(response.model_dump_json(exclude={"frames"} if frames is None else None))

    async def _run(self, call: NodeCall, frames: list[NodeOutput] | None) -> tuple[NodeResult, str]:
        """Run the call within its timeout; a generator's frames are kept in ``frames``."""
        try:
            async with asyncio.timeout(call.timeout_seconds):
                if frames is None:
                    result = await self.runner.run(call)
                else:
                    result = await self.runner.run_frames(call, lambda frame: _keep(frames, frame))
        except TimeoutError:
            return NodeResult(None, error=f"timed out after {call.timeout_seconds:g}s"), "timeout"
        return result, ("success" if result.output is not None else "error")

    async def feedback(self, request: Request) -> Response:
        """``POST /Feedback``: a validator's account of one of this miner's own steps.

        Only the validator the message names may send it (its signature says who it
        is), and only about this miner (its uid now and, when named, its hotkey): anything
        else is 403 ``not_yours``. Accepted feedback is kept in the store and handed to
        the planner's ``observe`` (:class:`~miner.feedback.FeedbackInbox`).
        """
        message = await _parse(request, StepFeedback)
        if isinstance(message, Response):
            return message
        snapshot = self.metagraph.snapshot()
        neuron = None if snapshot is None else snapshot.by_hotkey(self.hotkey)
        mismatch = _not_ours(message, caller_hotkey(request.scope), self.hotkey, None if neuron is None else neuron.uid)
        if mismatch is not None:
            return _error(403, "not_yours", mismatch)
        ahead = block_refusal(message.block, snapshot.block)  # type: ignore[union-attr]  # a uid means a snapshot
        if ahead is not None:
            return _error(422, "block_ahead", ahead)
        taken = self.inbox.submit(message)
        if taken is None:
            return _error(503, "busy", "the planner has not caught up with the feedback already sent")
        stored, observed = await taken
        if observed:
            self.planning.renew()  # the planning processes are forks: they learn it by forking again
        return _json(_dumps({"status": "accepted", "stored": stored, "observed": observed}))

    async def health(self, request: Request) -> Response:
        """``GET /health``: who this miner is and whether it is ready; 503 with the reason when not."""
        snapshot = self.metagraph.snapshot()
        state = readiness(snapshot, self.hotkey, self.metagraph.problem())
        payload = {
            "status": "ok" if state.ready else "not_ready",
            "reason": state.reason,
            "version": self.version,
            "hotkey": self.hotkey,
            "scoring_version": SCORING_VERSION,
            "uid": state.uid,
            "registered": state.uid is not None,
            "synced": snapshot is not None,
            "metagraph_block": snapshot.block if snapshot is not None else None,
            "planner": {
                "name": self.planning.name,
                "interface": PLANNER_INTERFACE,
                "timeout_s": self.planner_timeout_s,
                "workers": self.planning.size,
                "restarts": self.planning.restarts,
                "failures": dict(self.metrics.planner_failure_counts),
            },
        }
        return Response(content=_dumps(payload), status_code=200 if state.ready else 503, media_type=_JSON)

    async def prometheus(self, request: Request) -> Response:
        """``GET /metrics``: Prometheus text exposition."""
        body, content_type = self.metrics.render()
        return Response(content=body, media_type=content_type)


def _not_ours(message: StepFeedback, sender: str | None, hotkey: str, uid: int | None) -> str | None:
    """Why ``message`` is not this miner's to take, or ``None`` (``sender`` is ``None``
    only with auth off: then nobody's signature is checked)."""
    if sender is not None and message.validator_hotkey != sender:
        return f"feedback signed by {sender} names validator {message.validator_hotkey}"
    if message.miner_uid != uid or message.miner_hotkey not in (None, hotkey):
        return f"feedback for uid {message.miner_uid} ({message.miner_hotkey or 'no hotkey'}), not this miner"
    return None


def _keep(frames: list[NodeOutput], frame: NodeOutput) -> bool:
    """Keep one more frame for the response, up to :data:`MAX_FRAMES`."""
    if len(frames) >= MAX_FRAMES:
        return False
    frames.append(frame)
    return True


async def internal_error(request: Request, exc: Exception) -> Response:
    """Any exception a handler did not expect: a 500 in the same JSON shape.

    Starlette re-raises after sending it, so the server logs the traceback.
    """
    return _error(500, "internal", f"internal error: {type(exc).__name__}")


async def _parse(request: Request, model: type[_M]) -> _M | Response:
    """The body as ``model``, or the 422 that says why it is not one."""
    body = request.scope.get(BODY)
    if body is None:
        body = await request.body()
    try:
        request.scope[PACKAGE] = parsed = model.model_validate_json(body)  # for the query's log line
        return parsed
    except ValidationError as exc:
        return _invalid(exc)
    except RecursionError:
        return _error(422, "schema", "request nested too deeply")


def _invalid(exc: ValidationError) -> Response:
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    if errors and errors[0]["type"] == "json_invalid":
        return _error(422, "malformed_json", f"body is not valid JSON: {errors[0]['msg']}")
    listed = [
        {"loc": ".".join(str(part) for part in e["loc"]) or "(body)", "msg": e["msg"], "type": e["type"]}
        for e in errors[:_MAX_ERRORS_LISTED]
    ]
    return _error(422, "schema", f"schema violation: {format_validation_error(exc)}", errors=listed)


def _error(status: int, reason: str, message: str, *, headers: dict[str, str] | None = None, **extra: Any) -> Response:
    return Response(content=error_body(reason, message, **extra), status_code=status, headers=headers, media_type=_JSON)


def _json(content: str | bytes) -> Response:
    return Response(content=content, media_type=_JSON)


def _dumps(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()
