"""The worlds a margin was played in, as the unit of its error: a window's mean margin
and its standard error counted in worlds (docs/scoring.md, "From scores to weights").

All the steps of a tempo run in that tempo's hidden world, so their margins share its
luck: a plan that happens to suit this tempo's bad spells is ahead on every step of it.
Counted as independent steps, a window inside one or two worlds looks certain of what is
one world's dice, and two validators (two secrets, two worlds) disagree. So a window
keeps its margins as :class:`Tally`s, one per world (the sum and count of that world's
margins; a step played without a hidden world is a unit of its own), and
:func:`clustered` gives the mean over every step and the cluster-robust standard error
over the worlds (CR1: the worlds' deviations summed, scaled by ``G/(G−1)``). With every
step its own unit that is exactly the textbook ``stdev/√n``.

With few worlds that error is itself uncertain, so the bar scales with it:
:func:`bar` is Student's *t* quantile, with ``G − 1`` degrees of freedom, at the
one-sided level that ``k`` standard errors would have with many worlds (``k`` = 2:
97.7 %). Two worlds need 13.9 errors, six 2.65, twenty-four 2.11; a window of 300
independent steps 2.01.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

__all__ = ["Tally", "added", "bar", "clustered", "t_cdf", "tallies", "trimmed"]


@dataclass(frozen=True, slots=True)
class Tally:
    """One world's margins in a window: the ``world`` (a tempo's number; ``None``: a step
    played without a hidden world, a unit of its own), how many (``n``) and their sum."""

    world: int | None
    n: int
    total: float

    def add(self, margin: float) -> Tally:
        return Tally(self.world, self.n + 1, self.total + margin)


def tallies(margins: Iterable[float], worlds: Iterable[int | None] | None = None) -> list[Tally]:
    """``margins`` as tallies, oldest first: each margin added to its world's (``worlds``
    runs beside ``margins``; ``None`` for all: each margin a unit of its own)."""
    kept: list[Tally] = []
    world_list = list(worlds) if worlds is not None else None
    for k, margin in enumerate(margins):
        kept = added(kept, margin, None if world_list is None else world_list[k])
    return kept


def added(window: Sequence[Tally], margin: float, world: int | None) -> list[Tally]:
    """``window`` with one more margin: into its world's tally when the window holds one
    (a step's world is the newest or an earlier one), else a new tally at the end."""
    kept = list(window)
    if world is not None:
        for k in range(len(kept) - 1, -1, -1):
            if kept[k].world == world:
                kept[k] = kept[k].add(margin)
                return kept
    kept.append(Tally(world, 1, margin))
    return kept


def trimmed(window: Sequence[Tally], *, units: int, worlds: int) -> list[Tally]:
    """The newest tallies of ``window`` within ``units`` tallies and ``worlds`` of them
    with a world: a window of worlds spans ``worlds`` tempos, one of single steps
    ``units`` steps."""
    kept: list[Tally] = []
    seen_worlds = 0
    for tally in reversed(window):
        if len(kept) == units or (tally.world is not None and seen_worlds == worlds):
            break
        seen_worlds += tally.world is not None
        kept.append(tally)
    return kept[::-1]


def clustered(window: Sequence[Tally]) -> tuple[float, float, int]:
    """The mean margin over every step of ``window``, its cluster-robust standard error
    over the tallies (``inf`` with fewer than two), and how many tallies there are."""
    count = sum(t.n for t in window)
    if count == 0:
        return 0.0, math.inf, 0
    mean = math.fsum(_finite(t.total) for t in window) / count
    units = len(window)
    if units < 2:
        return mean, math.inf, units
    spread = math.fsum((_finite(t.total) - t.n * mean) ** 2 for t in window)
    return mean, math.sqrt(units / (units - 1) * spread) / count, units


def bar(k: float, units: int) -> float:
    """How many standard errors a mean over ``units`` independent units must clear to be
    as sure as ``k`` errors over very many: Student's *t* quantile with ``units − 1``
    degrees of freedom at the level ``Φ(k)`` (``inf`` with fewer than two units)."""
    if units < 2:
        return math.inf
    return _t_quantile(NormalDist().cdf(k), units - 1)


@functools.lru_cache(maxsize=1024)
def _t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile (``p`` > 0.5) of Student's *t* with ``df`` degrees of freedom, by
    bisection on :func:`t_cdf` to about 1e-9; ``inf`` for a level a float cannot tell from 1."""
    if p >= 1.0:
        return math.inf
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        high *= 2
    for _ in range(200):
        middle = (low + high) / 2
        if t_cdf(middle, df) < p:
            low = middle
        else:
            high = middle
        if high - low < 1e-10:
            break
    return (low + high) / 2


def t_cdf(x: float, df: int) -> float:
    """Student's *t* distribution function with ``df`` (a positive integer) degrees of
    freedom, by its finite series (Abramowitz & Stegun 26.7.3 and 26.7.4)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {df}")
    theta = math.atan(x / math.sqrt(df))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if df % 2 == 1:
        term, series = 1.0, 0.0
        if df > 1:
            series = 1.0
            for k in range(1, (df - 1) // 2):
                term *= c2 * (2 * k) / (2 * k + 1)
                series += term
        a = 2 / math.pi * (theta + s * math.cos(theta) * series) if df > 1 else 2 * theta / math.pi
    else:
        term, series = 1.0, 1.0
        for k in range(1, df // 2):
            term *= c2 * (2 * k - 1) / (2 * k)
            series += term
        a = s * series
    return (1 + a) / 2


def _finite(value: float) -> float:
    return value if math.isfinite(value) else 0.0
