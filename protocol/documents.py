"""Loading a plan from any document a user may hand to ``dagnet plan check`` / ``dagnet run``.

Three shapes are accepted (docs/protocol.md): a bare workflow plan, a miner's
``WorkflowSynapse`` response (only ``workflow_plan`` and ``total_estimated_cost``
are read, so a response saved without its task fields still loads), and a task-list
``{"dag": [...]}`` document (:mod:`protocol.seed004`). This module checks shape only; graph rules are
:func:`protocol.validation.check_plan`'s. :func:`document_shape` tells a plan from a
task or a task set, so a command handed the wrong one can say so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import format_validation_error
from .plan import WorkflowPlan
from .seed004 import import_seed004, is_seed004

__all__ = ["PlanDocument", "PlanLoadError", "document_shape", "load_plan_document"]

DocumentKind = Literal["plan", "synapse", "seed004"]
DocumentShape = Literal["plan", "task", "taskset"]
_PLAN_KEYS = ("nodes", "workflow_plan", "dag")


class PlanLoadError(ValueError):
    """The document is not a plan in any accepted shape; the message names the field."""


@dataclass(frozen=True, slots=True)
class PlanDocument:
    plan: WorkflowPlan
    total_estimated_cost: float | None
    kind: DocumentKind


class _SynapseAnswer(BaseModel):
    """The part of a ``WorkflowSynapse`` response a plan document needs."""

    model_config = ConfigDict(extra="ignore")

    workflow_plan: WorkflowPlan
    total_estimated_cost: float | None = Field(default=None, ge=0, allow_inf_nan=False)


def document_shape(doc: Any) -> DocumentShape | None:
    """What a parsed JSON document looks like, by its keys: a task set (``tasks``), a
    plan in one of the accepted shapes, a task (``task_id`` and no plan), or ``None``."""
    if not isinstance(doc, dict):
        return None
    if "tasks" in doc:
        return "taskset"
    if any(key in doc for key in _PLAN_KEYS):
        return "plan"
    return "task" if "task_id" in doc else None


def load_plan_document(doc: Any) -> PlanDocument:
    """Recognise and validate ``doc`` (already parsed JSON); raises :class:`PlanLoadError`."""
    if not isinstance(doc, dict):
        raise PlanLoadError(f"(document): expected a JSON object, got {type(doc).__name__}")
    if is_seed004(doc):
        try:
            return PlanDocument(import_seed004(doc), None, "seed004")
        except ValueError as exc:
            raise PlanLoadError(f"task-list {exc}") from None
    if "workflow_plan" in doc:
        answer = _validate(_SynapseAnswer, doc)
        return PlanDocument(answer.workflow_plan, answer.total_estimated_cost, "synapse")
    return PlanDocument(_validate(WorkflowPlan, doc), None, "plan")


def _validate(model: type[BaseModel], doc: dict[str, Any]) -> Any:
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        raise PlanLoadError(format_validation_error(exc)) from None
