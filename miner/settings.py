"""The miner's settings: one pydantic model, built by the entry point, read by the app.

Nothing in the miner reads the environment; ``neurons.miner`` turns flags and
config files into a :class:`MinerSettings` and hands it down.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from planners.base import PLANNER_TIMEOUT_S
from protocol.limits import KIB, MIB
from protocol.synapse import ToolInfo
from storage import dagnet_home


def default_feedback_db(hotkey: str) -> Path:
    """Where ``dagnet miner`` keeps the feedback for ``hotkey`` unless told otherwise (under
    :func:`storage.dagnet_home`)."""
    return dagnet_home() / f"miner-{hotkey}" / "feedback.sqlite"


class RateLimit(BaseModel):
    """A token bucket per caller hotkey: ``per_second`` refill, ``burst`` capacity."""

    model_config = ConfigDict(extra="forbid")

    per_second: float = Field(default=50.0, gt=0, allow_inf_nan=False)
    burst: int = Field(default=100, ge=1)


class AuthWindow(BaseModel):
    """The ``btauth/1`` freshness window: nonces older than ``max_age_s`` or more
    than ``allowed_skew_s`` in the future are stale."""

    model_config = ConfigDict(extra="forbid")

    max_age_s: float = Field(default=10.0, gt=0, le=300, allow_inf_nan=False)
    allowed_skew_s: float = Field(default=2.0, ge=0, le=60, allow_inf_nan=False)

    @property
    def retention_s(self) -> float:
        """How long a seen nonce must be remembered so no replay slips through."""
        return self.max_age_s + self.allowed_skew_s


class ServerLimits(BaseModel):
    """Per-connection limits the server enforces below the app (:mod:`miner.server`).

    ``max_connections=None`` means the soft open-file limit minus 128.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_head_bytes: int = Field(default=16 * KIB, ge=1 * KIB)
    head_timeout_s: float = Field(default=10.0, gt=0, allow_inf_nan=False)
    body_timeout_s: float = Field(default=30.0, gt=0, allow_inf_nan=False)
    keep_alive_s: int = Field(default=5, ge=1)
    max_connections: int | None = Field(default=None, ge=1)


class PlannerSettings(BaseModel):
    """The planner's own section, ``[planner]`` (docs/planner.md): which planner, its
    deadline, and the options its factory is called with."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="good", min_length=1)
    """A built-in, an installed ``dagnet.planners`` entry point, or ``package.module:attr``."""
    timeout_s: float = Field(default=PLANNER_TIMEOUT_S, gt=0, le=60, allow_inf_nan=False)
    """The deadline of one plan: past it the planning process is killed (and replaced)."""
    options: dict[str, Any] = Field(default_factory=dict)
    workers: int = Field(default=2, ge=1, le=32)
    """Planning processes (:mod:`miner.workers`), each planning one query at a time."""
    per_validator: int = Field(default=1, ge=1)
    """Queries of one validator hotkey planned at once (:mod:`miner.quota`)."""
    queue_per_validator: int = Field(default=2, ge=0)
    """Queries of one validator waiting for its slot; any more are refused (429 ``planner_busy``)."""
    cpu_per_s: float = Field(default=0.5, gt=0, allow_inf_nan=False)
    """Planning CPU seconds one validator earns per second."""
    cpu_burst_s: float = Field(default=30.0, gt=0, allow_inf_nan=False)
    """Planning CPU seconds one validator may bank; at zero it is refused (429 ``planning_allowance``)."""


class MinerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=8091, ge=0, le=65535)
    netuid: int = Field(default=1, ge=0)
    max_body_bytes: int = Field(default=1 * MIB, ge=1)
    max_buffered_bytes: int = Field(default=32 * MIB, ge=1)
    """All request bodies being read at once, together (the oldest are evicted past it)."""
    server: ServerLimits = Field(default_factory=ServerLimits)
    rate_limit: RateLimit = Field(default_factory=RateLimit)
    min_stake: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    require_validator_permit: bool = True
    max_concurrency: int = Field(default=64, ge=1)
    planner: PlannerSettings = Field(default_factory=PlannerSettings)
    serve: dict[str, list[str]] = Field(default_factory=dict)
    """The tools this miner serves on ``/NodeSynapse``: partner subnet → its actions,
    ``"*"`` for every subnet or every action (:mod:`miner.serving`). Empty, the default:
    none. ``python_exec`` is served only under bwrap."""
    provider_subnets: dict[str, ToolInfo] = Field(default_factory=dict)
    """The pricing of the subnets served (``/NodeSynapse``): the delay, failures and
    cost this miner plays for each; empty means the tools' own cost, no delay."""
    provider_tasks: dict[str, dict[str, ToolInfo]] = Field(default_factory=dict)
    """Per task id, the subnet table this miner plays for that task's nodes (a local
    network's stand-in provider charging, delaying and failing as each task's
    ``available_tools`` says); other task ids use ``provider_subnets``."""
    workers: int = Field(default=1, ge=1, le=64)
    nonce_db: Path | None = None
    """SQLite file shared by workers for replay protection; only used when
    ``workers > 1`` (default: a per-port file in the temp directory)."""
    auth: AuthWindow = Field(default_factory=AuthWindow)
    feedback_db: Path | None = None
    """SQLite file keeping the validators' feedback across restarts (docs/protocol.md,
    "Feedback"). ``dagnet miner`` defaults it to :func:`default_feedback_db`; an app
    built without one hands feedback to the planner and keeps none."""

    def nonce_db_path(self) -> Path:
        """Where the shared nonce store lives when several workers serve."""
        if self.nonce_db is not None:
            return self.nonce_db
        return Path(tempfile.gettempdir()) / f"dagnet-miner-{self.port}-nonces.sqlite"
