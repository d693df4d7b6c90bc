"""What a tempo's own runs reveal, read against the forecast a validator sends.

A validator that plays a hidden world sends its forecast of the tempo's world with each
package (``TaskPackage.forecast``, docs/protocol.md): every subnet outside a bad spell,
and the chance ``spell_p`` that a subnet is in one this tempo. About half of each
subnet's behaviour is drawn afresh each tempo, and the spells wholly, in each
validator's world apart (docs/tasks.md, "The hidden world"): nothing published says
them, the tempo's runs do. Per validator, tempo and subnet, :class:`TempoEvidence`
keeps a :class:`Tally` of what this miner's feedback reported:

- node runs, and those that met an outage (a window in which every call is refused at
  once): a subnet in a spell meets one in most runs, one outside a spell seldom;
- attempts outside outages, those that got no answer and the answers of low quality;
- what each answered call cost against its advertised price (a call costs its price,
  so one call tells the tempo's price), and how long each attempt took against its
  advertised latency.

:func:`spell_chance` reads the outages by Bayes (``spell_p`` the prior, the forecast's
outage chance the rate outside a spell); :func:`learned` moves each forecast field
towards what was seen, as far as the forecast's own uncertainty (the fresh part's
spread) and the counts warrant.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from protocol.feedback import NodeFeedback, StepFeedback
from protocol.forecast import SubnetForecast
from protocol.synapse import ToolInfo
from subnets.world import CALL_SIGMA, DEGRADE_SLOPE, FAIL_SLOPE, FRESH_SHARE, LATENCY_SIGMA, LOW_QUALITY, SPELL_LATENCY

__all__ = ["SEEN_IN_SPELL", "Tally", "TempoEvidence", "learned", "refused", "spell_chance"]

SEEN_IN_SPELL = 0.6
"""The chance that a run on a subnet in a spell sees an outage: the world's design puts an
outage window in at least 80 % of such runs, and a run whose calls fall outside the window
does not see it."""
KEPT = 64
"""The most (validator, tempo) worlds counted at once; the oldest tempos go first."""
OUTAGE = "outage"
"""What an attempt refused in an outage window says (``subnet X unavailable: outage``)."""


def refused(error: str | None) -> bool:
    """Whether an attempt's ``error`` says it was refused in an outage window."""
    return error is not None and OUTAGE in error


@dataclass(slots=True)
class Tally:
    """One subnet in one validator's tempo."""

    runs: int = 0
    """Node runs (one a node of a plan, frame instances each)."""
    outages: int = 0
    """Runs that met an outage."""
    answered: int = 0
    """Attempts outside outages."""
    unanswered: int = 0
    """Of them, those that got no answer (``unavailable (attempt N)``)."""
    answers: int = 0
    """Attempts that got an answer (charged)."""
    poor: int = 0
    """Of them, answers of low quality."""
    priced: int = 0
    price: float = 0.0
    """Summed over ``priced`` answers: cost over the advertised ``avg_cost``."""
    timed: int = 0
    log_latency: float = 0.0
    """Summed over ``timed`` attempts outside outages: log of seconds over the advertised ``avg_latency``."""

    def add(self, node: NodeFeedback, info: ToolInfo | None) -> None:
        """Count one run of ``node``; ``info`` (its subnet's advertised profile in the package
        it was planned for, ``None`` when unknown) prices and times it."""
        self.runs += 1
        outside = [a for a in node.attempts if not refused(a.error)]
        self.outages += len(outside) < len(node.attempts)
        answers = [a for a in outside if a.error is None or LOW_QUALITY in a.error]
        self.answered += len(outside)
        self.unanswered += len(outside) - len(answers)
        self.answers += len(answers)
        self.poor += len(answers) - sum(a.error is None for a in answers)
        if info is None:
            return
        if answers and info.avg_cost > 0:
            self.priced += len(answers)
            self.price += node.cost_tao / info.avg_cost
        if info.avg_latency > 0:
            timed = [a.latency_s for a in outside if a.latency_s > 0]
            self.timed += len(timed)
            self.log_latency += math.fsum(math.log(s / info.avg_latency) for s in timed)


@dataclass
class TempoEvidence:
    """Per (validator hotkey, tempo): each subnet's :class:`Tally`."""

    worlds: dict[tuple[str, int], dict[str, Tally]] = field(default_factory=dict)

    def add(self, feedback: StepFeedback, nodes: Iterable[NodeFeedback], tools: Mapping[str, ToolInfo]) -> None:
        """Count ``nodes`` (one record a node run) of ``feedback``, priced and timed against
        ``tools`` (the package's advertised profiles; empty when unknown); a message that
        names no tempo says nothing of one."""
        if feedback.tempo is None:
            return
        tallies = self.worlds.setdefault((feedback.validator_hotkey, feedback.tempo), {})
        for node in nodes:
            tallies.setdefault(node.subnet, Tally()).add(node, tools.get(node.subnet))
        if len(self.worlds) > KEPT:
            del self.worlds[min(self.worlds, key=lambda k: k[1])]

    def of(self, validator: str, tempo: int) -> dict[str, Tally]:
        return self.worlds.get((validator, tempo), {})


def spell_chance(prior: float, outage_p: float, tally: Tally, seen: float = SEEN_IN_SPELL) -> float:
    """The chance that a subnet is in a spell, ``prior`` before any run, after ``tally``'s
    runs, when a run outside a spell meets an outage with chance ``outage_p`` and one in a
    spell sees it with chance ``seen``."""
    if prior <= 0 or prior >= 1:
        return prior
    outside = min(max(outage_p, 1e-3), 0.5)
    logit = (
        math.log(prior / (1 - prior))
        + tally.outages * math.log(seen / outside)
        + (tally.runs - tally.outages) * math.log((1 - seen) / (1 - outside))
    )
    return 1 / (1 + math.exp(-max(min(logit, 700.0), -700.0)))


def learned(told: SubnetForecast, tally: Tally, spell: float) -> dict[str, float]:
    """``told``'s fields outside a spell that ``tally`` moves, for a subnet in a spell with
    chance ``spell``:

    - ``price``: the mean over the priced answers (a call costs exactly its price);
    - ``latency``: the posterior median, the forecast's with the fresh part's spread as
      its prior, each timed attempt a lognormal draw around it (less a spell's slowdown,
      weighed by ``spell``);
    - ``fail_p`` and ``degrade_p``: the forecast's rate counted as as many attempts as its
      fresh part's spread is worth, plus what was seen."""
    found: dict[str, float] = {}
    if tally.priced:
        found["price"] = tally.price / tally.priced
    if tally.timed:
        prior, call = 1 / (LATENCY_SIGMA**2 * FRESH_SHARE), 1 / CALL_SIGMA**2
        slower = math.log(1 + spell * (SPELL_LATENCY - 1))
        seen = tally.log_latency - tally.timed * slower
        found["latency"] = math.exp((prior * math.log(told.latency) + call * seen) / (prior + call * tally.timed))
    if tally.answered:
        found["fail_p"] = _rate(told.fail_p, FAIL_SLOPE, tally.unanswered, tally.answered)
    if tally.answers and told.degrade_p > 0:
        found["degrade_p"] = _rate(told.degrade_p, DEGRADE_SLOPE, tally.poor, tally.answers)
    return found


def _rate(forecast: float, slope: float, hits: int, count: int) -> float:
    """``forecast`` (a chance that is logistic in a latent value, ``slope`` its weight) as
    pseudo-counts, as many as the fresh part's spread on the logit scale is worth, plus
    ``hits`` of ``count``."""
    p = min(max(forecast, 1e-3), 1 - 1e-3)
    weight = 1 / (p * (1 - p) * slope**2 * FRESH_SHARE)
    return (hits + weight * p) / (count + weight)
