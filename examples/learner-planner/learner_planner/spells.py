"""Bad spells a tempo's own runs reveal, read against the forecast a validator sends.

A validator that plays a hidden world sends its forecast of the tempo's world with each
package (``TaskPackage.forecast``, docs/protocol.md): every subnet outside a bad spell,
and the chance ``spell_p`` that a subnet is in one this tempo. A spell is drawn afresh
each tempo and in each validator's world on its own, so nothing published says which
subnets are in one; the tempo's runs do: a subnet in a spell refuses the calls of most
runs for a while (an *outage*), one outside a spell seldom.

:class:`SpellEvidence` counts, per validator, tempo and subnet, the node runs this
miner's feedback reports and how many of them met an outage. :func:`spell_chance` is
the chance of a spell given those counts (Bayes, with ``spell_p`` as the prior and the
forecast's outage chance as the rate outside a spell).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from protocol.feedback import NodeFeedback, StepFeedback

__all__ = ["SEEN_IN_SPELL", "SpellEvidence", "Tally", "spell_chance"]

SEEN_IN_SPELL = 0.6
"""The chance that a run on a subnet in a spell sees an outage: the world's design puts an
outage window in at least 80 % of such runs, and a run whose calls fall outside the window
does not see it."""
KEPT = 64
"""The most (validator, tempo) worlds counted at once; the oldest tempos go first."""
OUTAGE = "outage"
"""What an attempt refused in an outage window says (``subnet X unavailable: outage``)."""


@dataclass(slots=True)
class Tally:
    """One subnet in one validator's tempo: node runs, and those that met an outage."""

    runs: int = 0
    outages: int = 0


@dataclass
class SpellEvidence:
    """Per (validator hotkey, tempo): each subnet's :class:`Tally`."""

    worlds: dict[tuple[str, int], dict[str, Tally]] = field(default_factory=dict)

    def add(self, feedback: StepFeedback, nodes: Iterable[NodeFeedback]) -> None:
        """Count ``nodes`` (one record a node run) of ``feedback``; a message that names no
        tempo says nothing of one."""
        if feedback.tempo is None:
            return
        key = (feedback.validator_hotkey, feedback.tempo)
        tallies = self.worlds.setdefault(key, {})
        for node in nodes:
            tally = tallies.setdefault(node.subnet, Tally())
            tally.runs += 1
            tally.outages += any(a.error is not None and OUTAGE in a.error for a in node.attempts)
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
