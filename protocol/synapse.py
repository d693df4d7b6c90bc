"""Neuron-to-neuron messages: the task package (``WorkflowSynapse``) and the node call.

A node call and its outcome are defined once, in :mod:`protocol.runner`; ``NodeSynapse``
and ``NodeResponse`` here are their wire views, derived from those fields, with
``of`` and ``call``/``result`` to convert.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Literal, Self, TypeVar, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, create_model

from .forecast import WorldForecast
from .hints import EXAMPLES, HintTier, PublicExample
from .plan import NODE_ID_PATTERN, WorkflowPlan
from .runner import NodeCall, NodeResult

_M = TypeVar("_M", bound=BaseModel)

SCORING_VERSION = 1
"""Published as the integer ``version_key`` with weights and in ``/health``."""

Aggregation = Literal["majority_vote", "median_logit"]


class Constraints(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_budget_tao: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    max_latency_seconds: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    allowed_subnets: list[str] | None = None


class ToolInfo(BaseModel):
    """A subnet a plan may call: the kind of service it offers and what it costs.

    ``fail_first`` is for local networks and benchmarks: a stand-in provider of this
    subnet fails the first N attempts of every node, so declared retries matter.
    """

    model_config = ConfigDict(extra="forbid")

    type: str
    avg_cost: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    avg_latency: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    fail_first: int = Field(default=0, ge=0, le=10)


class RoutingRule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    top_k: int = Field(default=1, ge=1, le=16)
    aggregation: Aggregation = "majority_vote"


class StepHint(BaseModel):
    """One abstract step a task needs done, for planners that work without a model.

    A hint says *what* (an action and its params, which may hold DataRefs to other
    steps); the miner decides *how*: which allowed subnet of ``kind`` runs it, the
    edges, parallelism, retries and timeouts.
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=NODE_ID_PATTERN)
    action: str = Field(min_length=1, max_length=128)
    kind: str = Field(min_length=1, max_length=64)
    params: dict[str, Any] = Field(default_factory=dict)


class TaskPackage(BaseModel):
    """What a validator sends: everything a miner needs to design a plan."""

    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(min_length=1, max_length=128)
    task_type: str = Field(min_length=1, max_length=64)
    description: str = Field(default="", max_length=64 * 1024)
    inputs: dict[str, Any] = Field(default_factory=dict)
    """JSON Schema of the task's external inputs, which plans read as ``${input.<path>}``."""
    example: dict[str, Any] = Field(default_factory=dict)
    """A public instance of the inputs; the validator executes plans on hidden ones."""
    quality_criteria: dict[str, Any] = Field(default_factory=dict)
    constraints: Constraints = Field(default_factory=Constraints)
    available_tools: dict[str, ToolInfo] = Field(default_factory=dict)
    routing_policy: dict[str, RoutingRule] = Field(default_factory=dict)
    steps: list[StepHint] = Field(default_factory=list, max_length=256)
    hint_tier: HintTier = "full"
    """How much of the plan ``steps`` hands over (:mod:`protocol.hints`)."""
    examples: list[PublicExample] = Field(default_factory=list, max_length=2 * EXAMPLES)
    """Public instances with their answers, drawn from seeds never scored on."""
    send_block: int = Field(default=0, ge=0)
    scoring_version: int = SCORING_VERSION
    forecast: WorldForecast | None = None
    """The sending validator's forecast of the tempo's world from the worlds it published
    (:mod:`protocol.forecast`): what its reference plans on. ``None`` when it plays none."""

    def route(self, subnet: str) -> RoutingRule:
        return self.routing_policy.get(subnet) or self.routing_policy.get("default") or RoutingRule()


class WorkflowSynapse(TaskPackage):
    """The task package with the miner's answer filled in.

    Miner fields are optional on the model so a request and a response share it;
    :func:`protocol.response.check_response` enforces that a response has them all.
    """

    model_config = ConfigDict(extra="ignore")

    miner_uid: int | None = Field(default=None, ge=0)
    workflow_plan: WorkflowPlan | None = None
    total_estimated_cost: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    total_estimated_latency: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    confidence: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)
    reasoning: str | None = Field(default=None, max_length=16 * 1024)


MINER_FIELDS = (
    "miner_uid",
    "workflow_plan",
    "total_estimated_cost",
    "total_estimated_latency",
    "confidence",
    "reasoning",
)


class _NodeCallWire(BaseModel):
    """The wire view of :class:`~protocol.runner.NodeCall` (``POST /NodeSynapse``'s body)."""

    model_config = ConfigDict(extra="forbid")

    @classmethod
    def of(cls, call: NodeCall) -> Self:
        """``call`` as a request, validated (``ValidationError`` when it breaks a field's rule)."""
        return cls.model_validate(call, from_attributes=True)

    def call(self) -> NodeCall:
        return NodeCall(**dict(self))


class _NodeResultWire(BaseModel):
    """The wire view of :class:`~protocol.runner.NodeResult`: a provider's answer to one call.

    For a generator action, ``frames`` holds every frame it yielded, in order, and
    ``output`` their summary. Transport retries are the caller's count, not the provider's."""

    model_config = ConfigDict(extra="forbid")

    @classmethod
    def of(cls, result: NodeResult) -> Self:
        return cls.model_validate(result, from_attributes=True)

    def result(self, unplanned_retries: int = 0) -> NodeResult:
        return NodeResult(**dict(self), unplanned_retries=unplanned_retries)


def _wire_model(shape: type, name: str, base: type[_M], *, leave_out: frozenset[str] = frozenset()) -> type[_M]:
    """A pydantic model of dataclass ``shape``'s fields (types, constraints, defaults)
    on ``base``: the wire view of a shape defined once in :mod:`protocol.runner`."""
    hints = get_type_hints(shape, include_extras=True)
    fields: dict[str, Any] = {}
    for spec in dataclasses.fields(shape):
        if spec.name in leave_out:
            continue
        if spec.default is not dataclasses.MISSING:
            default: Any = spec.default
        elif spec.default_factory is not dataclasses.MISSING:
            default = Field(default_factory=spec.default_factory)
        else:
            default = ...
        fields[spec.name] = (hints[spec.name], default)
    return create_model(name, __base__=base, __module__=__name__, __doc__=base.__doc__, **fields)


if TYPE_CHECKING:  # models made at run time: the type checker knows them by their bases
    NodeSynapse = _NodeCallWire
    NodeResponse = _NodeResultWire
else:
    NodeSynapse = _wire_model(NodeCall, "NodeSynapse", _NodeCallWire)
    """One resolved node, sent to a tool provider of its subnet: :class:`NodeCall` on the wire."""

    NodeResponse = _wire_model(NodeResult, "NodeResponse", _NodeResultWire, leave_out=frozenset({"unplanned_retries"}))
    """A provider's answer to one node call: :class:`NodeResult` on the wire."""
