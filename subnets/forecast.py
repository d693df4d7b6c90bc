"""What everything public says about a tempo's hidden world: a forecast from the published past.

A validator publishes each tempo's world once the tempo is over (``GET /world/<tempo>``),
and the world's design is documented (:mod:`subnets.world`, docs/tasks.md): each
parameter of a subnet is a monotone map of a standard normal latent value, whose values
``lag`` tempos apart have the covariance :func:`subnets.world.latent_covariance`; a bad
spell is drawn afresh each tempo with chance :data:`subnets.world.SPELL_P`. So the best
guess of tempo ``T``'s latent value from the published tempos before it is the Gaussian
conditional mean ``c·Σ⁻¹·z`` (``Σ`` the covariance of the published values, ``c`` their
covariance with tempo ``T``), known up to the conditional variance ``1 − c·Σ⁻¹·c``: the
fresh part and whatever the past does not pin down. A parameter a published world does
not tell (a spell's outage and latency, a tail at its ceiling) is left out of that
tempo's values.

:func:`forecast` is what any miner can work out without feedback; the validator's
reference plans on it (docs/scoring.md). It reads at most :data:`HISTORY` published
tempos: older ones move a forecast by little (their weight is the persistent part's
alone) and cost time.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from protocol.forecast import SubnetForecast, WorldForecast
from protocol.synapse import TaskPackage, ToolInfo

from .world import (
    PARAMS,
    SPELL_P,
    SubnetTruth,
    World,
    WorldSource,
    in_spell,
    latent_covariance,
    latents_of,
    truth_of,
)

P = TypeVar("P", bound=TaskPackage)

__all__ = ["HISTORY", "Forecast", "forecast", "forecast_world", "published_forecast", "with_forecast"]

HISTORY = 24
"""The most published tempos a forecast reads (the last ones)."""


@dataclass(frozen=True)
class Forecast:
    """Tempo ``tempo``'s world as the published past predicts it."""

    tempo: int
    base: World
    """Each subnet at its forecast latent values, outside a bad spell."""
    spread: Mapping[str, Mapping[str, float]]
    """Per subnet and parameter, the conditional standard deviation of its latent value:
    what the published past leaves open (at least the fresh part's)."""

    @property
    def expected(self) -> World:
        """:attr:`base` with the spells weighed in by their chance (:data:`SPELL_P`): the
        profile to plan on."""
        return World(self.tempo, "", {name: in_spell(t, SPELL_P) for name, t in self.base.subnets.items()})

    def wire(self, validator: str, subnets: Iterable[str]) -> WorldForecast:
        """What a validator (hotkey ``validator``) sends of this forecast with a package
        listing ``subnets`` (:mod:`protocol.forecast`)."""
        told = {name: self.base.subnets[name] for name in sorted(subnets) if name in self.base.subnets}
        return WorldForecast(
            tempo=self.tempo,
            validator=validator,
            spell_p=SPELL_P,
            subnets={name: SubnetForecast(**_fields(truth)) for name, truth in told.items()},
        )


def forecast(published: Mapping[int, World], tempo: int, advertised: Mapping[str, ToolInfo]) -> Forecast:
    """Tempo ``tempo``'s forecast for the subnets ``advertised`` lists, from the
    ``published`` worlds of earlier tempos (tempo → world; later ones are ignored)."""
    past = sorted(t for t in published if t < tempo)[-HISTORY:]
    base: dict[str, SubnetTruth] = {}
    spread: dict[str, dict[str, float]] = {}
    for name in sorted(advertised):
        info = advertised[name]
        seen = {t: latents_of(published[t].subnets[name], info) for t in past if name in published[t].subnets}
        mean, sd = {}, {}
        for param in PARAMS:
            lags = tuple(tempo - t for t in sorted(seen) if param in seen[t])
            weights, variance = _conditional(lags)
            mean[param] = math.fsum(w * seen[tempo - lag][param] for w, lag in zip(weights, lags))
            sd[param] = math.sqrt(max(variance, 0.0))
        base[name] = truth_of(mean, info)
        spread[name] = sd
    return Forecast(tempo, World(tempo, "", base), spread)


def published_forecast(worlds: WorldSource, secret: int, tempo: int, advertised: Mapping[str, ToolInfo]) -> Forecast:
    """:func:`forecast` of ``tempo`` from the worlds ``worlds`` draws for the tempos
    before it: what the validator of ``secret`` has published by then."""
    past = range(max(0, tempo - HISTORY), tempo)
    return forecast({t: worlds(secret, t, advertised) for t in past}, tempo, advertised)


def forecast_world(
    sent: WorldForecast,
    chances: Mapping[str, float] | None = None,
    learned: Mapping[str, Mapping[str, float]] | None = None,
) -> World:
    """The world a package's forecast tells (``TaskPackage.forecast``), each subnet's spell
    weighed in by its chance in ``chances`` (by id; the forecast's ``spell_p`` for the rest)
    and its fields outside a spell replaced by those ``learned`` gives (by id: field →
    value, :class:`protocol.forecast.SubnetForecast`'s fields): with neither, the world the
    sending validator's reference planned on."""
    chances, learned = chances or {}, learned or {}
    return World(
        sent.tempo,
        "",
        {
            name: in_spell(
                SubnetTruth(**(told.model_dump() | dict(learned.get(name, {})))), chances.get(name, sent.spell_p)
            )
            for name, told in sent.subnets.items()
        },
    )


def with_forecast(package: P, prior: Forecast | None, validator: str) -> P:
    """``package`` as the validator ``validator`` sends it: with ``prior``'s forecast of the
    subnets it lists (unchanged when ``prior`` is ``None``: no world is played)."""
    if prior is None:
        return package
    return package.model_copy(update={"forecast": prior.wire(validator, package.available_tools)})


def _fields(truth: SubnetTruth) -> dict[str, float]:
    return {name: getattr(truth, name) for name in SubnetForecast.model_fields}


@functools.lru_cache(maxsize=256)
def _conditional(lags: tuple[int, ...]) -> tuple[tuple[float, ...], float]:
    """The weights of the latent values ``lags`` tempos back in the conditional mean of
    the current one, and its conditional variance (1 with nothing published)."""
    if not lags:
        return (), 1.0
    sigma = [[latent_covariance(a - b) for b in lags] for a in lags]
    c = [latent_covariance(lag) for lag in lags]
    weights = _solve(sigma, c)
    return tuple(weights), 1 - math.fsum(w * v for w, v in zip(weights, c))


def _solve(matrix: list[list[float]], vector: list[float]) -> list[float]:
    """``matrix⁻¹ · vector`` for a symmetric positive definite ``matrix`` (Cholesky)."""
    n = len(vector)
    low = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1):
            total = matrix[i][j] - math.fsum(low[i][k] * low[j][k] for k in range(j))
            low[i][j] = math.sqrt(total) if i == j else total / low[j][j]
    y = [0.0] * n
    for i in range(n):
        y[i] = (vector[i] - math.fsum(low[i][k] * y[k] for k in range(i))) / low[i][i]
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (y[i] - math.fsum(low[k][i] * x[k] for k in range(i + 1, n))) / low[i][i]
    return x
