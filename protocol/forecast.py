"""The forecast a validator sends with each task package: what is public about the tempo's world.

A validator that plays a hidden world (docs/tasks.md, "The hidden world") publishes each
tempo's world once the tempo is over, and the world's design is documented, so the best
guess of the current tempo's world from that past is public knowledge. The validator's
reference plans on exactly that guess (docs/scoring.md), and the validator sends it with
the package (``TaskPackage.forecast``) so that every miner starts where the reference
does: a margin pays for what a miner learns beyond it, not for fetching it.

Each subnet's :class:`SubnetForecast` is its forecast *outside a bad spell*, as factors
on its advertised profile (``available_tools``); ``spell_p`` is the chance that any one
subnet is in a bad spell this tempo, drawn afresh each tempo, which only the tempo's own
runs reveal. The numbers are the validator's; a miner may trust them as much as it
trusts that validator.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MAX_FORECAST_SUBNETS", "SubnetForecast", "WorldForecast"]

MAX_FORECAST_SUBNETS = 1024
"""More subnets than any package lists (a request is at most 1 MiB anyway)."""

_Factor = Field(gt=0, le=1000, allow_inf_nan=False)
_Chance = Field(ge=0, le=1, allow_inf_nan=False)


class SubnetForecast(BaseModel):
    """One subnet outside a bad spell, relative to its advertised profile
    (the fields of :class:`subnets.world.SubnetTruth`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    latency: float = _Factor
    """Median latency as a multiple of ``avg_latency``."""
    spread: float = Field(ge=0, le=10, allow_inf_nan=False)
    """Per-call lognormal sigma around the median."""
    tail_p: float = _Chance
    tail: float = Field(ge=1, le=1000, allow_inf_nan=False)
    """With chance ``tail_p`` a call takes ``tail`` times longer."""
    price: float = _Factor
    """Price per call as a multiple of ``avg_cost``."""
    fail_p: float = _Chance
    """The chance that an attempt gets no answer (charged nothing)."""
    outage_p: float = _Chance
    """The chance that a run meets one outage window (every call in it refused)."""
    degrade_p: float = _Chance
    """The chance that an answer is low quality (charged)."""


class WorldForecast(BaseModel):
    """The forecast of tempo ``tempo``'s world of the validator ``validator`` (its hotkey),
    from the worlds it published before it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tempo: int = Field(ge=0)
    validator: str = Field(max_length=64)
    """Whose world: each validator plays its own, so feedback from it (``StepFeedback.validator_hotkey``)
    speaks of this one."""
    spell_p: float = _Chance
    """The chance that a subnet is in a bad spell this tempo (outages in most runs, slower)."""
    subnets: dict[str, SubnetForecast] = Field(default_factory=dict, max_length=MAX_FORECAST_SUBNETS)
    """The package's subnets, by id, outside a spell."""
