"""Paid for beating the reference: per-step margins, copies and variants by first commit,
margins clear of their standard error, and the weights a window earns (docs/scoring.md,
"From scores to weights").

Each step the validator also runs its own reference planner on the same instance, at
the same tier, in the same world (on common random numbers: a call draws the same dice
in every plan that makes it, :func:`subnets.world.draw_key`), and scores it like any
miner. A miner's *margin* on the step is ``S − S_reference``, its own, never divided.

**Copies and variants by first commit** (:func:`leaders`). Over the window, a miner whose
answers are the same as an earlier miner's (the same canonical program, or the same S and
final output) or stay within :data:`EPSILON` of them (mean per-step ``|ΔS|``) is in that
miner's group. Miners are taken in first-commit order (the validator's: first seen sending
the answer, then earliest registration); a group's earliest member, its *leader*, takes
the group's credit, the later members nothing: no credit, no floor, and no loss. A later
member displaces the leader only by beating it by more than ``EPSILON`` in mean S over the
steps both were asked, clear of that difference's standard error. A step one of them did
not answer (no plan: a timeout, an invalid reply) is its 0 S, but no sign that it sends
another answer: answers are matched over the steps both answered.

**Weights** (:func:`margin_weights`), over the leaders' window means:

- every leader whose mean margin is clear of its standard error (``mean − k·SE > 0``,
  the error counting the worlds the margins were played in and ``k`` the bar that
  :data:`K_SE` is with that many worlds, :mod:`scoring.worlds`) shares ``1 − FLOOR`` in
  proportion to ``mean − k·SE``;
- every other leader whose mean score is clear of one standard error shares ``FLOOR`` in
  proportion to its mean score: monotone in S, the same for a distinct answer as for a
  copy of the reference, and nothing for a window that scored on a lucky step or two;
- when nobody beats the reference, ``1 − FLOOR`` goes to ``burn_uid`` when one is given
  (the subnet owner's uid, as live subnets burn), else the floor group takes it all;
- with nobody above the floor and no scores at all, nothing is set.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from .worlds import Tally, bar, clustered, tallies

__all__ = [
    "EPSILON",
    "FLOOR",
    "K_SE",
    "WINDOW",
    "WORLDS",
    "Answer",
    "Credit",
    "Entry",
    "MarginWeights",
    "Means",
    "NetworkPay",
    "Payout",
    "beat_share",
    "credits",
    "leaders",
    "margin_weights",
    "network_pay",
    "outcome_key",
    "window_means",
]


FLOOR = 0.05
"""The share of the emission the leaders at or below the reference share (docs/scoring.md)."""

K_SE = 2.0
"""A beater's mean margin must be more than ``K_SE`` standard errors above 0, and it is
paid in proportion to ``mean − K_SE·SE``: a margin that is within its own noise of 0
is the dice, not planning, and two validators' windows agree on it only by chance. With
one error a planner level with the reference cleared in about one window in six, and
validators paid it on some and not others (docs/benchmarks.md); with two, one in forty-four.
It is the bar with very many worlds: a window of fewer asks more (:func:`scoring.worlds.bar`)."""

WINDOW = 300
"""The steps a miner's window holds (scores, answers, and margins played without a hidden
world): what its weights are set from."""

WORLDS = 24
"""The worlds a miner's window of margins spans: every margin of the last 24 tempos'
hidden worlds (:mod:`scoring.worlds`). A tempo's steps share its world's luck, so the
error counts worlds, and a window of a few worlds cannot tell planning from that luck."""

EPSILON = 0.005
"""Answers whose S differ by at most this on average per step (over the steps both
answered) are one answer, and a later miner displaces an earlier one only by beating its
mean S by more than this."""


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
    """What one step credits a miner: its ``margin`` over the reference, whole (copies
    are grouped over the window at weight time, :func:`leaders`), and ``share`` 1.0 (kept
    for the records' column)."""

    margin: float
    share: float = 1.0


def outcome_key(score: float, final_output: Any) -> str:
    """What an execution did, as a key (:attr:`Answer.outcome`): its ``S`` and final output, hashed."""
    did = json.dumps({"S": score, "output": final_output}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(did.encode()).hexdigest()


def credits(answers: Mapping[int, Answer], reference: float) -> dict[int, Credit]:
    """Each uid's credit for one step: ``S − reference``, its own (non-finite scores count
    as 0). Nothing is divided among copies here: a loss or a win is each answer's own,
    and copies are told apart from originals over the window (:func:`leaders`)."""
    return {uid: Credit(_finite(answer.score) - reference) for uid, answer in sorted(answers.items())}


@dataclass(frozen=True, slots=True)
class Entry:
    """One step of a miner's window, as grouping reads it: the step's id (its block), the
    miner's S, its margin (``None`` when the step had no reference score), its plan's
    canonical digest and its outcome key (:class:`Answer`)."""

    step: int
    score: float
    margin: float | None
    digest: str | None = None
    outcome: str | None = None

    @property
    def answered(self) -> bool:
        """Whether the miner answered the step: sent a plan (its digest) or one that ran
        (its outcome). A step with neither (no reply, a timeout, an invalid plan) is a 0 S
        of its own, but says nothing of which answer the miner sends."""
        return self.digest is not None or self.outcome is not None

    def same(self, other: Entry) -> bool:
        """Whether the two answers are one: one program, or one execution."""
        return (self.digest is not None and self.digest == other.digest) or (
            self.outcome is not None and self.outcome == other.outcome
        )


def leaders(
    windows: Mapping[int, Sequence[Entry]], order: Sequence[int], *, epsilon: float = EPSILON, k_se: float = K_SE
) -> dict[int, int]:
    """Each uid's group leader (itself when it leads). ``order`` is first-commit order
    (earliest first; uids it leaves out come after, by uid). A uid joins the first group
    (in order) whose leader's answers its own match over the steps both answered
    (:attr:`Entry.answered`; a step one of them sent no answer is no evidence either way):
    per step a distance of 0 for the same answer (:meth:`Entry.same`), else ``|ΔS|``, whose
    mean is at most ``epsilon``. It takes over that group's lead when its mean S over the
    steps both were asked (a step without an answer a 0) is more than ``epsilon`` above the
    leader's, less ``k_se`` standard errors of the per-step difference; else it follows. A uid near no leader leads a group of
    its own. Groups are matched leader to member, never member to member, so a chain of
    near answers cannot carry a group away from what its leader does; but a uid that
    answers exactly as an earlier one did (distance 0 on every step both answered, and not
    clearly ahead of it) is that one's copy and follows its leader, wherever a displacement
    has moved it."""
    ranked = [uid for uid in order if uid in windows]
    ranked += sorted(set(windows) - set(ranked))
    steps = {uid: {entry.step: entry for entry in windows[uid]} for uid in ranked}
    heads: list[int] = []
    leader: dict[int, int] = {}
    for n, uid in enumerate(ranked):
        twin = _twin(steps, uid, ranked[:n], epsilon, k_se)
        if twin is not None:
            leader[uid] = leader[twin]
            continue
        for k, head in enumerate(heads):
            common = sorted(steps[uid].keys() & steps[head].keys())
            answered = _both_answered(steps[uid], steps[head], common)
            if not answered or _farther(steps[uid], steps[head], answered, epsilon):
                continue
            if _ahead(steps[uid], steps[head], common, k_se) > epsilon:  # clearly ahead: displaces the leader
                heads[k] = uid
                for member, their in leader.items():
                    if their == head:
                        leader[member] = uid
                leader[uid] = uid
            else:
                leader[uid] = head
            break
        else:
            heads.append(uid)
            leader[uid] = uid
    return leader


def _twin(
    steps: Mapping[int, Mapping[int, Entry]], uid: int, earlier: Sequence[int], epsilon: float, k_se: float
) -> int | None:
    """The earliest of ``earlier`` whose answers ``uid``'s are, step for step (one program,
    one execution, or the same S, on every step both answered, and there is one), and that
    ``uid`` is not clearly ahead of (the same program run faster is not a copy), or ``None``."""
    mine = steps[uid]
    for other in earlier:
        theirs = steps[other]
        if any(s in theirs and _differ(entry, theirs[s]) for s, entry in mine.items()):
            continue  # most pairs differ on their first step: no intersection is built for them
        common = sorted(mine.keys() & theirs.keys())
        if _both_answered(mine, theirs, common) and _ahead(mine, theirs, common, k_se) <= epsilon:
            return other
    return None


def _both_answered(mine: Mapping[int, Entry], theirs: Mapping[int, Entry], common: Sequence[int]) -> list[int]:
    """The steps of ``common`` both answered (:attr:`Entry.answered`): the only ones that
    tell whether two miners send one answer. A step one of them did not answer (a query
    that timed out under load) is that miner's 0 S, counted in its means and in who is
    ahead, but no evidence that it sends another answer: else one missed query would pay a
    copy as a group of its own."""
    return [s for s in common if mine[s].answered and theirs[s].answered]


def _differ(a: Entry, b: Entry) -> bool:
    """Whether two answers of one step are at a distance above 0 (:func:`_farther`'s terms);
    never when either did not answer (:func:`_both_answered`)."""
    return a.answered and b.answered and not a.same(b) and _finite(a.score) != _finite(b.score)


def _farther(mine: Mapping[int, Entry], theirs: Mapping[int, Entry], common: Sequence[int], epsilon: float) -> bool:
    """Whether the mean per-step distance over ``common`` is above ``epsilon``; stops as
    soon as the sum so far says so (every term is ≥ 0), so far-apart miners cost little."""
    bound, total = epsilon * len(common), 0.0
    for s in common:
        a, b = mine[s], theirs[s]
        if not a.same(b):
            total += abs(_finite(a.score) - _finite(b.score))
            if total > bound:
                return True
    return False


def _ahead(mine: Mapping[int, Entry], theirs: Mapping[int, Entry], common: Sequence[int], k_se: float) -> float:
    """How far ``mine`` is ahead of ``theirs`` per step, less ``k_se`` standard errors: a
    variant that met luckier timing on a few steps does not take the lead."""
    diffs = [_finite(mine[s].score) - _finite(theirs[s].score) for s in common]
    if len(diffs) < 2:
        return -math.inf
    mean, se = _mean_and_se(diffs, alone=math.inf)
    return mean - k_se * se


def beat_share(margins: Sequence[float]) -> float:
    """How often a window's margins beat the reference: the share of them that are
    positive (0 for an empty window)."""
    return sum(margin > 0 for margin in margins) / len(margins) if margins else 0.0


@dataclass(frozen=True, slots=True)
class Means:
    """A miner's window means: score ``S``, margin, and the margin's standard error
    counting worlds (``inf`` with fewer than two: one world says nothing of its luck), how
    many of them the margin must clear (``k_se``: :data:`K_SE` raised for the window's few
    worlds, :func:`window_means`), and the
    score's standard error (``score_se``; 0 with fewer than two scores: a validator's
    first weights follow its first step, and a later step's noise is measured)."""

    score: float
    margin: float
    se: float = 0.0
    k_se: float = K_SE
    score_se: float = 0.0

    def scaled(self, factor: float) -> Means:
        """Score, margin and their errors scaled by ``factor`` (a miner warming up)."""
        return Means(self.score * factor, self.margin * factor, self.se * factor, self.k_se, self.score_se * factor)

    @property
    def bar(self) -> float:
        """What the margin must exceed to be paid as a beater: ``k_se`` standard errors
        (``inf`` without an error; 0 with no noise, whatever ``k_se``)."""
        return self.k_se * self.se if self.se else 0.0

    @property
    def clear(self) -> float:
        """The margin less its :attr:`bar`: what a beater is paid in proportion to."""
        return self.margin - self.bar

    @property
    def floor_score(self) -> float:
        """What the floor pays in proportion to: the mean score when it is more than one
        standard error above 0, else 0. One lucky step in a window (a stored answer that
        happened to fit) has a mean equal to its standard error, and is the dice. One error,
        not ``k_se``: a miner that answers a third of the tasks well is not lucky, and the
        floor is shared by S, not staked on who clears a bar."""
        return self.score if _positive(self.score - self.score_se) else 0.0


def window_means(scores: Sequence[float], margins: Sequence[Tally], *, k_se: float = K_SE) -> Means:
    """The :class:`Means` of one window: ``scores`` its S per step, ``margins`` the
    margins of the steps that had a reference score, a tally per world
    (:mod:`scoring.worlds`: the error counts worlds, and the bar ``k_se`` rises where
    they are few)."""
    score, score_se = _mean_and_se(scores, alone=0.0)
    margin, se, units = clustered(margins)
    return Means(score, margin, se, bar(k_se, units) if units > 1 else k_se, score_se)


def _mean_and_se(values: Sequence[float], *, alone: float) -> tuple[float, float]:
    """The mean of ``values`` (0 with none) and its standard error (``alone`` with fewer than two)."""
    if not values:
        return 0.0, alone
    clean = [_finite(value) for value in values]
    se = statistics.stdev(clean) / math.sqrt(len(clean)) if len(clean) > 1 else alone
    return math.fsum(clean) / len(clean), se


@dataclass(frozen=True, slots=True)
class NetworkPay:
    """What :func:`network_pay` decided: the weights, each uid's means and leader."""

    paid: MarginWeights
    means: dict[int, Means]
    leaders: dict[int, int]


def network_pay(
    steps: Iterable[tuple[int, Mapping[int, Answer], float]],
    order: Sequence[int] = (),
    *,
    floor: float = FLOOR,
    burn_uid: int | None = None,
    k_se: float = K_SE,
    worlds: Mapping[int, int] | None = None,
) -> NetworkPay:
    """Pay a network played whole, as a validator pays it: ``steps`` are (step id, the
    step's answers, the reference's S); ``order`` is first-commit order (by default uid
    order); ``k_se`` the standard errors a margin must clear (validators: :data:`K_SE`);
    ``worlds`` the tempo whose world each step id was played in (a step left out is a unit
    of its own, :mod:`scoring.worlds`). How a bench or ``dagnet eval`` pays a network it
    plays itself."""
    world_of = worlds or {}
    windows: dict[int, list[Entry]] = {}
    for step, answers, reference in steps:
        for uid, answer in answers.items():
            score = _finite(answer.score)
            windows.setdefault(uid, []).append(Entry(step, score, score - reference, answer.digest, answer.outcome))
    means = {
        uid: window_means(
            [e.score for e in entries],
            tallies(
                [e.margin for e in entries if e.margin is not None],
                [world_of.get(e.step) for e in entries if e.margin is not None],
            ),
            k_se=k_se,
        )
        for uid, entries in sorted(windows.items())
    }
    led = leaders(windows, order or sorted(windows), k_se=k_se)
    paid = margin_weights({uid: m for uid, m in means.items() if led[uid] == uid}, floor=floor, burn_uid=burn_uid)
    return NetworkPay(paid, means, led)


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
    """Weights (summing to 1) from the window means of the group leaders (module
    docstring); a uid left out of ``means`` (a later member of a group) gets nothing."""
    if not 0 <= floor < 1:
        raise ValueError(f"floor must be in [0, 1), got {floor}")
    beaters = {uid: m.clear for uid, m in sorted(means.items()) if _positive(m.clear)}
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
    """The floor split in proportion to mean score over the leaders whose mean score is
    clear of its error (:attr:`Means.floor_score`): monotone in S, and a distinct answer
    earns no more than a copy of the reference at the same S (each group holds one
    answer's part, its leader's). While no leader's is clear (a validator's first steps,
    or steps that cannot settle), over every leader with a positive mean score: weights
    never wait for a window to fill."""
    clear = {uid: min(m.floor_score, 1.0) for uid, m in sorted(group.items()) if _positive(m.floor_score)}
    scored = clear or {uid: min(m.score, 1.0) for uid, m in sorted(group.items()) if _positive(m.score)}
    total = math.fsum(scored.values())
    return {uid: value / total for uid, value in scored.items()} if scored else {}


def _add(weights: dict[int, float], shares: Mapping[int, float], scale: float) -> None:
    for uid, share in shares.items():
        weights[uid] = weights.get(uid, 0.0) + scale * share


def _positive(value: float) -> bool:
    return math.isfinite(value) and value > 0


def _finite(value: float) -> float:
    return value if math.isfinite(value) else 0.0
