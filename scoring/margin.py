"""Paid for beating the reference: per-step margins, copies as one answer, and the
weights a window of margins earns (docs/scoring.md, "What a miner is paid for").

Each step the validator also runs its own reference planner on the same instance, at
the same tier, in the same world, and scores it like any miner. A miner's *margin* on
the step is ``S − S_reference``. Copies are one answer: the hotkeys that sent plans with
the same canonical digest (:func:`protocol.canonical.plan_digest`), or plans that ran the
same (the same S and final output), share a positive margin equally, so registering more
copies of a plan, or variants of it that change nothing, earns nothing more than one of
them alone. A loss is each one's own.

Weights come from the window's mean credited margin (losses count, so how reliably a
miner beats the reference matters as much as by how far). A copy of the reference
(every margin 0.0) is paid 0 over it.

- every miner whose mean credited margin is positive shares ``1 − FLOOR`` in proportion to it;
- every other miner with a positive mean score shares ``FLOOR``, in proportion to its
  share of the answers it sent times ``exp(S / FLOOR_TEMPERATURE)``: a newcomer still
  sees a gradient, a naive chain ranks below a copy of the reference, and copies hold
  one answer's part between them;
- when nobody beats the reference, ``1 − FLOOR`` goes to ``burn_uid`` when one is given
  (the subnet owner's uid, as live subnets burn), else the floor group takes it all;
- with nobody above the floor and no scores at all, nothing is set.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["FLOOR", "FLOOR_TEMPERATURE", "Answer", "Credit", "Means", "Payout", "MarginWeights",
           "beat_share", "credits", "margin_weights", "network_means", "outcome_key", "window_means"]


FLOOR = 0.05
"""The share of the emission every miner at or below the reference shares (docs/scoring.md)."""

FLOOR_TEMPERATURE = 0.01
"""The floor's softmax temperature: a miner 0.05 below another gets e⁻⁵ (1/148) of its
floor weight, so a naive chain ranks below a copy of the reference even when the copy
shares its plan with 63 others."""


@dataclass(frozen=True, slots=True)
class Answer:
    """One miner's scored answer on a step: its plan's canonical digest (``None`` when it
    sent no valid plan), its score ``S`` and ``outcome``, a key of what its execution did
    (the validator's hash of ``S`` and the final output; ``None`` when it did not run)."""

    digest: str | None
    score: float
    outcome: str | None = None


@dataclass(frozen=True, slots=True)
class Credit:
    """What one step credits a miner: its ``margin`` over the reference (a positive one
    divided among its copies) and its ``share`` of its answer (1 ÷ the hotkeys that sent it)."""

    margin: float
    share: float


def outcome_key(score: float, final_output: Any) -> str:
    """What an execution did, as a key (:attr:`Answer.outcome`): its ``S`` and final output, hashed."""
    did = json.dumps({"S": score, "output": final_output}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(did.encode()).hexdigest()


def credits(answers: Mapping[int, Answer], reference: float) -> dict[int, Credit]:
    """Each uid's credit for one step. ``S − reference`` is the margin. Answers with the
    same digest (one program) or the same outcome (plans that ran the same: the same S
    and final output) are copies, transitively: each of ``n`` copies holds ``1/n`` of the
    answer and of a positive margin, so copies together earn what one of them earns
    alone. A loss is each one's own. Non-finite scores count as 0."""
    groups = _copies(answers)
    sizes: dict[int, int] = {}
    for root in groups.values():
        sizes[root] = sizes.get(root, 0) + 1
    result = {}
    for uid, answer in sorted(answers.items()):
        share = 1.0 / sizes[groups[uid]]
        margin = _finite(answer.score) - reference
        result[uid] = Credit(margin * share if margin > 0 else margin, share)
    return result


def _copies(answers: Mapping[int, Answer]) -> dict[int, int]:
    """Each uid's group (its lowest uid): uids joined by a shared digest or outcome."""
    parent = {uid: uid for uid in answers}

    def root(uid: int) -> int:
        while parent[uid] != uid:
            parent[uid] = parent[parent[uid]]
            uid = parent[uid]
        return uid

    first: dict[tuple[str, str], int] = {}
    for uid, answer in sorted(answers.items()):
        for key in (("digest", answer.digest), ("outcome", answer.outcome)):
            if key[1] is None:
                continue
            other = first.setdefault(key, uid)
            a, b = root(uid), root(other)
            parent[max(a, b)] = min(a, b)
    return {uid: root(uid) for uid in answers}


def beat_share(margins: Sequence[float]) -> float:
    """How often a window's credited margins beat the reference: the share of them that
    are positive (0 for an empty window)."""
    return sum(margin > 0 for margin in margins) / len(margins) if margins else 0.0


@dataclass(frozen=True, slots=True)
class Means:
    """A miner's window means: score ``S``, credited margin and share of its answers."""

    score: float
    margin: float
    share: float = 1.0

    def scaled(self, factor: float) -> Means:
        """Score and margin scaled by ``factor`` (a miner warming up), share as it is."""
        return Means(self.score * factor, self.margin * factor, self.share)


def window_means(score: float, margins: Sequence[float], shares: Sequence[float]) -> Means:
    """The :class:`Means` of one window: ``score`` its mean S, ``margins`` and ``shares``
    the credited margins and shares of the steps that had a reference score."""
    return Means(score, _mean(margins, 0.0), _mean(shares, 1.0))


def network_means(steps: Iterable[tuple[Mapping[int, Answer], float]]) -> dict[int, Means]:
    """Each uid's window :class:`Means` over ``steps`` (each the step's answers and the
    reference's S), credited as a validator credits them: how a bench or ``dagnet eval``
    pays a network it plays itself."""
    kept: dict[int, tuple[list[float], list[float], list[float]]] = {}
    for answers, reference in steps:
        for uid, credit in credits(answers, reference).items():
            scores, margins, shares = kept.setdefault(uid, ([], [], []))
            scores.append(_finite(answers[uid].score))
            margins.append(credit.margin)
            shares.append(credit.share)
    return {uid: window_means(math.fsum(scores) / len(scores), margins, shares)
            for uid, (scores, margins, shares) in sorted(kept.items())}


def _mean(values: Sequence[float], empty: float) -> float:
    return math.fsum(values) / len(values) if values else empty


class Payout(StrEnum):
    """Where the emission went: to miners that beat the reference, or by the fallback."""

    MARGIN = "margin"
    BURN = "burn"
    FLOOR_ONLY = "floor_only"
    NOTHING = "nothing"


@dataclass(frozen=True, slots=True)
class MarginWeights:
    weights: dict[int, float]
    payout: Payout


def margin_weights(means: Mapping[int, Means], *, floor: float = FLOOR, burn_uid: int | None = None) -> MarginWeights:
    """Weights (summing to 1) from each uid's window means (module docstring)."""
    if not 0 <= floor < 1:
        raise ValueError(f"floor must be in [0, 1), got {floor}")
    beaters = {uid: m.margin for uid, m in sorted(means.items()) if _positive(m.margin)}
    floor_group = _floor_shares({uid: m for uid, m in means.items() if uid not in beaters})
    if beaters:
        total = math.fsum(beaters.values())
        kept = floor if floor_group else 0.0
        weights = {uid: (1.0 - kept) * m / total for uid, m in beaters.items()}
        _add(weights, floor_group, kept)
        return MarginWeights(weights, Payout.MARGIN)
    if burn_uid is not None:
        weights = {burn_uid: 1.0 - floor if floor_group else 1.0}
        _add(weights, floor_group, floor)
        return MarginWeights(weights, Payout.BURN)
    if floor_group:
        return MarginWeights(floor_group, Payout.FLOOR_ONLY)
    return MarginWeights({}, Payout.NOTHING)


def _floor_shares(group: Mapping[int, Means]) -> dict[int, float]:
    """The floor split by ``share × exp(S / FLOOR_TEMPERATURE)`` over the miners with a
    positive mean score: copies hold one answer's part between them."""
    scored = {uid: m for uid, m in sorted(group.items()) if _positive(m.score) and _positive(m.share)}
    if not scored:
        return {}
    best = max(min(m.score, 1.0) for m in scored.values())
    raw = {uid: min(m.share, 1.0) * math.exp((min(m.score, 1.0) - best) / FLOOR_TEMPERATURE) for uid, m in scored.items()}
    total = math.fsum(raw.values())
    return {uid: value / total for uid, value in raw.items()}


def _add(weights: dict[int, float], shares: Mapping[int, float], scale: float) -> None:
    for uid, share in shares.items():
        weights[uid] = weights.get(uid, 0.0) + scale * share


def _positive(value: float) -> bool:
    return math.isfinite(value) and value > 0


def _finite(value: float) -> float:
    return value if math.isfinite(value) else 0.0
