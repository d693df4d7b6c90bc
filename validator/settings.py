"""The validator's settings: one pydantic model, every default written here once.

``dagnet validator`` builds a :class:`ValidatorSettings` from its defaults, ``--config
FILE``, ``--set KEY=VALUE`` and its flags (:func:`neurons.settings.build_settings`);
nothing below reads the environment or a file. The keys a validator signs with and the
chain it talks to are not settings: the process config adds them (:mod:`neurons.validator`).
This module imports no server and no chain SDK, so ``dagnet --help`` can show the defaults;
the loop's own config (:class:`validator.loopconfig.LoopConfig`) takes its defaults from here.

``adapters`` is the operator's table of external execution (docs/validator.md,
adapters): a subnet name (``sn8``) or ``"*"`` (every subnet not named) mapped to
:class:`DagnetAdapter` (tool providers answering ``NodeSynapse``) or
:class:`OpenAIAdapter` (an OpenAI-compatible endpoint behind the ``llm`` action).
A subnet without an adapter is executed by the validator itself.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from engine.model import ExecutorConfig
from tasks import VERSION

from .sampling import DEFAULT_TIER_SHARES, tier_shares_problem

__all__ = [
    "SHIPPED_TASKS",
    "setting_default",
    "Adapter",
    "DagnetAdapter",
    "OpenAIAdapter",
    "ProviderEntry",
    "ValidatorSettings",
]

SHIPPED_TASKS = Path(VERSION)
"""``--tasks v2``: the shipped task families (a hidden instance drawn per step)."""


def _owned_by(config: type, name: str) -> Any:
    """The default a lower layer's config dataclass gives ``name``."""
    return next(f.default for f in dataclasses.fields(config) if f.name == name)


def setting_default(name: str) -> Any:
    """The default of setting ``name``: what the loop's and the client's own configs default to."""
    return ValidatorSettings.model_fields[name].get_default(call_default_factory=True)


_ADAPTER_KEY = re.compile(r"sn\d{1,5}|\*")


class ProviderEntry(BaseModel):
    """One tool provider the operator names. ``coldkey``, when given, lets the trust
    rules refuse it the plans of miners owned by the same coldkey."""

    model_config = ConfigDict(extra="forbid")

    uid: int = Field(ge=0)
    hotkey: str = Field(min_length=1)
    url: str = Field(pattern=r"^https?://")
    coldkey: str = ""


class DagnetAdapter(BaseModel):
    """Tool providers speaking ``NodeSynapse``: a fixed list, or the serving neurons of
    one netuid's metagraph (largest stake first). Exactly one of the two."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["dagnet"]
    providers: list[ProviderEntry] | None = None
    netuid: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _one_source(self) -> DagnetAdapter:
        if (self.providers is None) == (self.netuid is None):
            raise ValueError("a dagnet adapter takes exactly one of providers (a list) or netuid")
        return self


class OpenAIAdapter(BaseModel):
    """The ``llm`` action of a subnet answered by an OpenAI-compatible endpoint; the API
    key is read from the environment variable ``api_key_env`` when the validator starts."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["openai"]
    base_url: str = Field(pattern=r"^https?://")
    model: str = Field(min_length=1)
    api_key_env: str | None = Field(default=None, min_length=1)
    timeout_s: float = Field(default=30.0, gt=0, allow_inf_nan=False)


Adapter = Annotated[DagnetAdapter | OpenAIAdapter, Field(discriminator="kind")]


class ValidatorSettings(BaseModel):
    """Every validator setting. A field's docstring is its ``dagnet validator`` option's
    help, and its default is written here or, where a lower layer owns the value, read
    from it (:func:`_owned_by`): no default is written twice."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    netuid: int = Field(default=1, ge=0)
    """Subnet uid."""
    state: Path = Path("validator.sqlite")
    """The SQLite state file (scores, records, task lifecycle)."""
    tasks: Path = SHIPPED_TASKS
    """v2 (the shipped task families, a hidden instance drawn each step) or a task-set file."""
    host: str = "127.0.0.1"
    """Address of /health and /metrics."""
    port: int = Field(default=9100, ge=0, le=65535)
    """Port of /health and /metrics; 0 picks a free one."""
    sample_size: int = Field(default=256, ge=1)
    """Miners queried per step."""
    query_timeout_s: float = Field(default=8.0, gt=0, lt=12.0)
    """Seconds a miner has to answer (< one block)."""
    exec_concurrency: int = Field(default=16, ge=1)
    """Plans executed at once."""
    step_work_s: float = Field(default=120.0, gt=0, allow_inf_nan=False)
    """Seconds of work (tools' CPU, sandboxed programs' wall time) one step's plans share:
    each plan gets an equal share, never more than its own allowance (docs/hardening.md)."""
    step_deadline_s: float = Field(default=90.0, gt=0, allow_inf_nan=False)
    """Seconds from a step's start after which its unfinished executions are their miners' failures."""
    max_frames: int = Field(default=_owned_by(ExecutorConfig, "max_frames"), ge=0)
    """Frames one generator node may emit."""
    max_frame_instances: int = Field(default=_owned_by(ExecutorConfig, "max_frame_instances"), ge=0)
    """Frame instances one plan's run may hold, over all its generators."""
    poll_s: float = Field(default=1.0, gt=0)
    """Seconds between looks at the chain head."""
    tier_shares: dict[str, float] = Field(default_factory=lambda: dict[str, float](DEFAULT_TIER_SHARES.items()))
    """The share of steps sent at each hint tier (``full``, ``outline``, ``goal``), summing to 1."""
    drawn_per_tempo: int = Field(default=8, ge=0, le=64)
    """Families drawn from the secret each tempo, offered besides the curated ones (shipped tasks only)."""
    log_level: str = "info"
    """debug | info | warning | error."""
    adapters: dict[str, Adapter] = Field(default_factory=dict)
    """External execution by subnet (see the module); empty: the validator runs every node."""

    @model_validator(mode="after")
    def _tier_shares(self) -> ValidatorSettings:
        problem = tier_shares_problem(self.tier_shares)
        if problem is not None:
            raise ValueError(f"tier_shares: {problem}")
        return self

    @model_validator(mode="after")
    def _adapter_keys(self) -> ValidatorSettings:
        bad = sorted(key for key in self.adapters if not _ADAPTER_KEY.fullmatch(key))
        if bad:
            raise ValueError(f'adapters: {", ".join(map(repr, bad))} is not a subnet (snN) or "*"')
        return self

    def dagnet_adapters(self) -> dict[str, DagnetAdapter]:
        return {key: a for key, a in self.adapters.items() if isinstance(a, DagnetAdapter)}

    def openai_adapters(self) -> dict[str, OpenAIAdapter]:
        return {key: a for key, a in self.adapters.items() if isinstance(a, OpenAIAdapter)}
