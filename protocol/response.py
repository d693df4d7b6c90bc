"""Validator-side checks of a miner's ``WorkflowSynapse`` answer (docs/protocol.md, docs/scoring.md).

An invalid response scores 0 and its plan never runs. Per-node static blocks
(``PlanCheck.node_errors``) do not make a response invalid: those nodes are blocked
when the plan executes and cost the miner completion instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from . import strictjson
from .errors import format_validation_error
from .limits import DEFAULT_LIMITS, Limits
from .plan import WorkflowPlan
from .synapse import MINER_FIELDS, TaskPackage, WorkflowSynapse
from .validation import PlanCheck, check_plan_for

__all__ = ["ResponseCheck", "check_response"]

_ERRORS_REPORTED = 5


@dataclass(frozen=True, slots=True)
class ResponseCheck:
    """Why the response was rejected (``None``: accepted); ``plan_check`` exists once the plan was checked."""

    reason: str | None = None
    synapse: WorkflowSynapse | None = None
    plan_check: PlanCheck | None = None

    @property
    def ok(self) -> bool:
        return self.reason is None


class _Rejected(Exception):
    def __init__(self, reason: str, synapse: WorkflowSynapse | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.synapse = synapse


def check_response(raw: bytes, request: TaskPackage, *, limits: Limits = DEFAULT_LIMITS) -> ResponseCheck:
    """Decide whether ``raw`` is a valid answer to ``request``. Never raises on any bytes.

    Every known way to be wrong has its own reason; anything else a check raises
    (a bug, or an input no one foresaw) still rejects the response instead of
    escaping, so one miner's bytes can never stop a step.
    """
    try:
        return _check(raw, request, limits)
    except Exception as exc:  # the boundary: a peer's bytes never become our exception
        return ResponseCheck(reason=f"response check failed: {type(exc).__name__}: {_short(exc)}")


def _check(raw: bytes, request: TaskPackage, limits: Limits) -> ResponseCheck:
    try:
        doc, synapse = _parse(raw, limits)
        plan = _check_fields(doc, synapse, request)
    except _Rejected as rejected:
        return ResponseCheck(rejected.reason, rejected.synapse)
    plan_check = check_plan_for(plan, request, limits=limits)
    if not plan_check.runnable:
        return ResponseCheck(f"invalid plan: {_summary(plan_check.errors)}", synapse, plan_check)
    return ResponseCheck(None, synapse, plan_check)


def _parse(raw: bytes, limits: Limits) -> tuple[dict[str, Any], WorkflowSynapse]:
    if len(raw) > limits.max_response_bytes:
        raise _Rejected(f"response too large: {len(raw)} bytes > {limits.max_response_bytes}")
    try:
        doc = strictjson.loads(raw)
    except ValueError as exc:
        raise _Rejected(f"response is not JSON: {_short(exc)}") from None
    if not isinstance(doc, dict):
        raise _Rejected(f"response is not a JSON object: got {type(doc).__name__}")
    try:
        return doc, WorkflowSynapse.model_validate(doc)
    except ValidationError as exc:
        raise _Rejected(f"schema violation: {format_validation_error(exc)}") from None
    except RecursionError:
        raise _Rejected("schema violation: response nested too deeply") from None


def _check_fields(doc: dict[str, Any], synapse: WorkflowSynapse, request: TaskPackage) -> WorkflowPlan:
    """The miner's fields are all there and match the request; returns the plan."""
    required = ("scoring_version", *MINER_FIELDS)  # scoring_version has a model default
    missing = [name for name in required if doc.get(name) is None]
    if missing:
        raise _Rejected(f"missing miner fields: {', '.join(missing)}", synapse)
    if synapse.scoring_version != request.scoring_version:
        raise _Rejected(
            f"scoring_version mismatch: got {synapse.scoring_version}, expected {request.scoring_version}",
            synapse,
        )
    if synapse.task_id != request.task_id:
        raise _Rejected(f"task_id mismatch: got {synapse.task_id!r}, expected {request.task_id!r}", synapse)
    assert synapse.workflow_plan is not None  # checked as a required field above
    return synapse.workflow_plan


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 160 else text[:160] + "..."


def _summary(errors: list[str]) -> str:
    text = "; ".join(errors[:_ERRORS_REPORTED])
    if len(errors) > _ERRORS_REPORTED:
        text += f"; and {len(errors) - _ERRORS_REPORTED} more"
    return text
