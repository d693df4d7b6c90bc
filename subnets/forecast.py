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
from collections.abc import Mapping
from dataclasses import dataclass, replace

from protocol.synapse import ToolInfo

from .world import (
    PARAMS,
    SPELL_LATENCY,
    SPELL_OUTAGE_P,
    SPELL_P,
    SubnetTruth,
    World,
    WorldSource,
    latent_covariance,
    latents_of,
    truth_of,
)

__all__ = ["HISTORY", "Forecast", "forecast", "published_forecast"]

HISTORY = 24
"""The most published tempos a forecast reads (the last ones)."""


@dataclass(frozen=True)
class Forecast:
    """Tempo ``tempo``'s world as the published past predicts it."""

    tempo: int
    expected: World
    """Each subnet at its forecast latent values, spells weighed in by their chance: the
    profile to plan on."""
    spread: Mapping[str, Mapping[str, float]]
    """Per subnet and parameter, the conditional standard deviation of its latent value:
    what the published past leaves open (at least the fresh part's)."""


def forecast(published: Mapping[int, World], tempo: int, advertised: Mapping[str, ToolInfo]) -> Forecast:
    """Tempo ``tempo``'s forecast for the subnets ``advertised`` lists, from the
    ``published`` worlds of earlier tempos (tempo → world; later ones are ignored)."""
    past = sorted(t for t in published if t < tempo)[-HISTORY:]
    expected: dict[str, SubnetTruth] = {}
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
        expected[name] = _with_spells(truth_of(mean, info))
        spread[name] = sd
    return Forecast(tempo, World(tempo, "", expected), spread)


def published_forecast(worlds: WorldSource, secret: int, tempo: int, advertised: Mapping[str, ToolInfo]) -> Forecast:
    """:func:`forecast` of ``tempo`` from the worlds ``worlds`` draws for the tempos
    before it: what the validator of ``secret`` has published by then."""
    past = range(max(0, tempo - HISTORY), tempo)
    return forecast({t: worlds(secret, t, advertised) for t in past}, tempo, advertised)


def _with_spells(truth: SubnetTruth) -> SubnetTruth:
    """``truth`` with a spell's outage chance and latency weighed in by :data:`SPELL_P`."""
    outage = (1 - SPELL_P) * truth.outage_p + SPELL_P * max(truth.outage_p, SPELL_OUTAGE_P)
    return replace(truth, outage_p=outage, latency=truth.latency * (1 + SPELL_P * (SPELL_LATENCY - 1)))


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
