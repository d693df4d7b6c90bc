"""The hidden world: what each partner subnet really does in one tempo.

A package's ``available_tools`` is each subnet's *advertised* profile (price, latency,
``fail_first``). On a real network that profile is a stale prior: latency has a tail,
failures come and go, prices move, a text provider sometimes answers badly. A
:class:`World` is that truth for one tempo, drawn from the validator's secret
(:func:`world_for`), and owned execution plays it (:class:`subnets.runner.LocalRunner`).

Each subnet's truth is a :class:`SubnetTruth`: factors on its advertised profile, keyed
by subnet id (``sn5`` behaves alike in every family of a tempo). Its latent values are a
persistent part (drawn once from the secret), a moving average over per-tempo noise (so
tempo ``t`` resembles ``t − 1``) and a fresh part drawn for the tempo alone; and in a
tempo a subnet may be in a *bad spell* (outages most of its runs, slower), drawn afresh
each tempo. The published past predicts the persistent and drifting parts
(:mod:`subnets.forecast`); the fresh part and the spells only feedback from the tempo
itself reveals.

Every call's outcome (:meth:`World.call`) is a pure function of the world, the
instance (task id and seed), the call's draw key (:func:`draw_key`: what the node does,
its subnet, action and resolved params, never what it is called), the attempt and (for
outages) the simulated time it starts: sha256 of those, never an RNG's state, so a run's
score is the same on a quiet or a loaded machine and in whatever order its nodes were
scheduled. Keying by what a node does gives common random numbers: a renamed or
reordered copy of a plan draws the same dice, and the reference and a miner draw the
same dice on every call they have in common, so a margin measures the programs, not
the dice. :data:`ADVERTISED` is the
world in which every subnet does exactly what its profile says (today's ``LocalRunner``).

A world is published once its tempo is over (``GET /world/<tempo>`` on a validator's
health server): it holds no secret, only the drawn truths and the per-call salt, so
anyone can replay a record of that tempo.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from statistics import NormalDist
from typing import Any

from protocol.synapse import ToolInfo

__all__ = [
    "ADVERTISED",
    "PARAMS",
    "Outcome",
    "SubnetTruth",
    "World",
    "WorldSource",
    "advertised",
    "draw_key",
    "in_spell",
    "latent_covariance",
    "latents_of",
    "spelled",
    "truth_of",
    "world_for",
    "world_named",
]

DEGRADED_TYPES = frozenset({"text"})
"""Subnet types whose answers vary in quality by provider (model and text subnets)."""
LOW_QUALITY = "low-quality answer"

# How far truth strays from the advertised profile (the world's spread). Latent values
# are standard normal; each parameter is a monotone map of one of them.
PERSISTENT_SHARE = 0.25
"""Share of each latent value's variance that never changes for a secret."""
FRESH_SHARE = 0.45
"""Share drawn afresh each tempo, independent of every other tempo; the rest
(``1 − PERSISTENT_SHARE − FRESH_SHARE``) is the moving average below."""
DRIFT_RHO = 0.7
"""Weight of tempo ``t − k``'s noise is ``DRIFT_RHO ** k`` in the moving average."""
DRIFT_WINDOW = 6
LATENCY_MU, LATENCY_SIGMA = -0.1, 0.35
"""Median latency = advertised × exp(MU + SIGMA·z)."""
CALL_SIGMA = 0.3
"""Per-call lognormal spread around the median."""
TAIL_P, TAIL_SIGMA, TAIL_MAX_P, TAIL_FACTOR = 0.03, 0.8, 0.3, 3.0
PRICE_MU, PRICE_SIGMA = -0.05, 0.3
FAIL_BASE, FLAKY_BASE, FAIL_SLOPE = 0.15, 0.5, 0.6
"""Per-attempt failure: logistic around FAIL_BASE (FLAKY_BASE for an advertised flaky subnet)."""
OUTAGE_BASE, OUTAGE_SLOPE = 0.03, 1.0
OUTAGE_START, OUTAGE_SPAN = (0.0, 3.0), (5.0, 30.0)
"""An outage starts this far into a run and lasts this long, in the subnet's own calls
(multiples of its advertised ``avg_latency``): an outage costs a quick subnet's runs as
much as a slow one's, however long the run."""
OUTAGE_LATENCY = 0.1
"""A call in an outage is refused after this share of its latency, and costs nothing."""
DEGRADE_BASE, DEGRADE_SLOPE = 0.08, 0.8
SPELL_P = 0.15
"""Chance that a subnet is in a bad spell in a tempo, drawn afresh each tempo."""
SPELL_OUTAGE_P, SPELL_LATENCY = 0.8, 1.5
"""In a spell a run meets an outage window with at least this chance, and the median
latency is this many times longer."""
PARAMS = ("latency", "tail", "price", "fail", "outage", "degrade")
_UNIT = NormalDist()


@dataclass(frozen=True, slots=True)
class SubnetTruth:
    """One subnet's behaviour in one tempo, relative to its advertised profile."""

    latency: float = 1.0
    """Median latency as a multiple of ``avg_latency``."""
    spread: float = 0.0
    """Per-call lognormal sigma around the median."""
    tail_p: float = 0.0
    tail: float = 1.0
    """With probability ``tail_p`` a call takes ``tail`` times longer."""
    price: float = 1.0
    """Price per call as a multiple of ``avg_cost``."""
    fail_p: float = 0.0
    """Per-attempt failure probability (replaces ``fail_first``); a failed attempt costs nothing."""
    outage_p: float = 0.0
    """Chance that a run sees one outage window of this subnet (every call in it fails)."""
    degrade_p: float = 0.0
    """Chance that an answer is low quality (the call fails with ``low-quality answer``, and is charged)."""
    spell: bool = False
    """Whether the subnet is in a bad spell this tempo (its outage chance and latency already
    say so; the flag tells a forecast that these values are not the subnet's own)."""

    @property
    def failing(self) -> float:
        """The chance that one attempt fails, outages counted at half their chance (a run
        meets a window for part of its time)."""
        return 1 - (1 - self.fail_p) * (1 - self.degrade_p) * (1 - self.outage_p / 2)

    def expected(self, info: ToolInfo) -> ToolInfo:
        """The profile that tells this truth: expected latency (tail included), true
        price, and the expected extra attempts (rounded) as ``fail_first``."""
        latency = info.avg_latency * self.latency * math.exp(self.spread**2 / 2) * (1 + self.tail_p * (self.tail - 1))
        extra = min(10, round(self.failing / (1 - self.failing)))
        return ToolInfo(type=info.type, avg_cost=info.avg_cost * self.price, avg_latency=latency, fail_first=extra)

    def attempts(self, success: float = 0.99) -> int:
        """The attempts a node needs to succeed with probability ``success`` (at most 11)."""
        if self.failing <= 0:
            return 1
        if self.failing >= 1:
            return 11
        return min(11, max(1, math.ceil(math.log(1 - success) / math.log(self.failing))))


@dataclass(frozen=True, slots=True)
class Outcome:
    """One call as the world plays it: how long it takes, what it costs, why it failed."""

    latency: float
    cost: float
    error: str | None = None


@dataclass(frozen=True)
class World:
    """Every subnet's truth for one tempo; ``tempo`` ``None`` and no truths is the
    advertised world. A subnet the world does not list plays its advertised profile."""

    tempo: int | None = None
    salt: str = ""
    """Keys every call's draw (hex; derived from the secret, published with the world)."""
    subnets: Mapping[str, SubnetTruth] = field(default_factory=dict)

    @property
    def is_advertised(self) -> bool:
        return not self.subnets

    def call(
        self, subnet: str, info: ToolInfo, instance: tuple[str, int], node: str, attempt: int, now: float
    ) -> Outcome:
        """The outcome of ``attempt`` of the call keyed ``node`` (:func:`draw_key`) on
        ``subnet`` (advertised ``info``) in ``instance`` (task id, seed), started ``now``
        simulated seconds into the run."""
        truth = self.subnets.get(subnet)
        if truth is None:
            error = f"subnet {subnet} unavailable (attempt {attempt})" if attempt <= info.fail_first else None
            return Outcome(info.avg_latency, info.avg_cost, error)
        u = _uniforms(self.salt, *instance, subnet, node, attempt)
        factor = math.exp(truth.spread * _UNIT.inv_cdf(_open(u[0])))
        if u[1] < truth.tail_p:
            factor *= truth.tail
        latency = info.avg_latency * truth.latency * factor
        cost = info.avg_cost * truth.price
        if self._down(subnet, truth, info, instance, now):  # refused at once: no answer, nothing charged
            return Outcome(latency * OUTAGE_LATENCY, 0.0, f"subnet {subnet} unavailable: outage")
        if u[2] < truth.fail_p:  # no answer: nothing to pay for
            return Outcome(latency, 0.0, f"subnet {subnet} unavailable (attempt {attempt})")
        if u[3] < truth.degrade_p:
            return Outcome(latency, cost, f"subnet {subnet}: {LOW_QUALITY}")
        return Outcome(latency, cost)

    def _down(self, subnet: str, truth: SubnetTruth, info: ToolInfo, instance: tuple[str, int], now: float) -> bool:
        """Whether ``subnet`` (advertised ``info``) is in its outage window of this run at ``now``."""
        if truth.outage_p <= 0:
            return False
        occurs, start, span = _uniforms(self.salt, *instance, subnet, "outage")[:3]
        if occurs >= truth.outage_p:
            return False
        begin = info.avg_latency * _between(OUTAGE_START, start)
        return begin <= now < begin + info.avg_latency * _between(OUTAGE_SPAN, span)

    def drawn(self, draw: int) -> World:
        """This world's draw number ``draw``: the same truths, other dice (every call's and
        every outage's). Draw 0 is the world itself; a margin averaged over several draws
        is an instance's margin with less of its luck (docs/scoring.md, "Several draws")."""
        if draw == 0:
            return self
        salt = hashlib.sha256(f"{self.salt}:draw:{draw}".encode()).hexdigest()
        return replace(self, salt=salt)

    def tools(self, available: Mapping[str, ToolInfo]) -> dict[str, ToolInfo]:
        """``available`` (a package's advertised tools) as this world's truth tells it:
        what an oracle that knows the world would plan from."""
        return {
            name: self.subnets[name].expected(info) if name in self.subnets else info
            for name, info in available.items()
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "tempo": self.tempo,
            "salt": self.salt,
            "subnets": {k: asdict(v) for k, v in sorted(self.subnets.items())},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> World:
        subnets = {name: SubnetTruth(**truth) for name, truth in data.get("subnets", {}).items()}
        return cls(data.get("tempo"), data.get("salt", ""), subnets)


ADVERTISED = World()

WorldSource = Callable[[int, int, Mapping[str, ToolInfo]], World]
"""``(secret, tempo, advertised tools) -> the tempo's world``: :func:`world_for`."""


def draw_key(subnet: str, action: str, params: Mapping[str, Any]) -> str:
    """What a call does, as the key its draws are made on: its subnet, action and params
    with every DataRef already resolved (hex sha256). A node's id is not in it, so copies
    under other names draw alike; its ancestry is, through the values its params read, and
    so is its frame (a frame instance reads its own frame's slice). Two calls that do the
    same thing in one run draw the same dice: a duplicated node hedges nothing."""
    text = json.dumps([subnet, action, params], sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def advertised() -> World:
    """The world in which every subnet does exactly what its advertised profile says."""
    return ADVERTISED


def world_for(secret: int, tempo: int, advertised: Mapping[str, ToolInfo]) -> World:
    """The hidden world of ``tempo`` for the subnets ``advertised`` lists (id → profile),
    drawn from ``secret``. A subnet's truth depends only on (secret, tempo, its id, its
    type, whether it is advertised flaky), so worlds drawn for different listings agree
    on the subnets they share."""
    salt = hashlib.sha256(f"dagnet world calls:{secret}:{tempo}".encode()).hexdigest()
    return World(tempo, salt, {name: _truth(secret, tempo, name, advertised[name]) for name in sorted(advertised)})


def world_named(name: str, secret: int, advertised: Mapping[str, ToolInfo]) -> World:
    """The world a command line names: ``advertised``, or a tempo (a whole number) drawn
    with ``secret`` for the subnets ``advertised`` lists. ``ValueError`` otherwise."""
    if name == "advertised":
        return ADVERTISED
    if not name.isdigit():
        raise ValueError(f"--world takes 'advertised' or a tempo (a whole number), not {name!r}")
    return world_for(secret, int(name), advertised)


def _truth(secret: int, tempo: int, subnet: str, info: ToolInfo) -> SubnetTruth:
    z = {param: _latent(secret, tempo, subnet, param) for param in PARAMS}
    truth = truth_of(z, info)
    if _uniforms("dagnet world", f"{secret}:{tempo}:{subnet}:spell")[0] < SPELL_P:
        truth = spelled(truth)
    return truth


def truth_of(z: Mapping[str, float], info: ToolInfo) -> SubnetTruth:
    """The truth of latent values ``z`` (one standard normal per parameter) for a subnet
    advertised as ``info``, outside a spell: each parameter a monotone map of its latent."""
    flaky = info.fail_first > 0
    degrades = info.type in DEGRADED_TYPES
    return SubnetTruth(
        latency=math.exp(LATENCY_MU + LATENCY_SIGMA * z["latency"]),
        spread=CALL_SIGMA,
        tail_p=min(TAIL_MAX_P, TAIL_P * math.exp(TAIL_SIGMA * z["tail"])),
        tail=TAIL_FACTOR,
        price=math.exp(PRICE_MU + PRICE_SIGMA * z["price"]),
        fail_p=_logistic(FLAKY_BASE if flaky else FAIL_BASE, FAIL_SLOPE * z["fail"]),
        outage_p=_logistic(OUTAGE_BASE, OUTAGE_SLOPE * z["outage"]),
        degrade_p=_logistic(DEGRADE_BASE, DEGRADE_SLOPE * z["degrade"]) if degrades else 0.0,
    )


def spelled(truth: SubnetTruth) -> SubnetTruth:
    """``truth`` in a bad spell: down for part of most runs, and slower."""
    return replace(
        truth, outage_p=max(truth.outage_p, SPELL_OUTAGE_P), latency=truth.latency * SPELL_LATENCY, spell=True
    )


def in_spell(truth: SubnetTruth, chance: float) -> SubnetTruth:
    """``truth`` (outside a spell) with a bad spell's outage chance and latency weighed in
    by ``chance``, the chance that it is in one: the profile to expect. ``chance`` 1 is
    :func:`spelled`."""
    if chance >= 1:
        return spelled(truth)
    outage = (1 - chance) * truth.outage_p + chance * max(truth.outage_p, SPELL_OUTAGE_P)
    return replace(truth, outage_p=outage, latency=truth.latency * (1 + chance * (SPELL_LATENCY - 1)))


def latents_of(truth: SubnetTruth, info: ToolInfo) -> dict[str, float]:
    """The latent values :func:`truth_of` maps to ``truth`` (its inverse), for the
    parameters ``truth`` tells: none of a spell's outage and latency, no tail at its
    ceiling, no text quality of a subnet that has none."""
    flaky = info.fail_first > 0
    z = {
        "price": (math.log(truth.price) - PRICE_MU) / PRICE_SIGMA,
        "fail": _logit_shift(truth.fail_p, FLAKY_BASE if flaky else FAIL_BASE) / FAIL_SLOPE,
    }
    if not truth.spell:
        z["latency"] = (math.log(truth.latency) - LATENCY_MU) / LATENCY_SIGMA
        z["outage"] = _logit_shift(truth.outage_p, OUTAGE_BASE) / OUTAGE_SLOPE
    if 0 < truth.tail_p < TAIL_MAX_P:
        z["tail"] = math.log(truth.tail_p / TAIL_P) / TAIL_SIGMA
    if info.type in DEGRADED_TYPES and 0 < truth.degrade_p < 1:
        z["degrade"] = _logit_shift(truth.degrade_p, DEGRADE_BASE) / DEGRADE_SLOPE
    return z


def latent_covariance(lag: int) -> float:
    """The covariance of one parameter's latent values ``lag`` tempos apart (variance 1):
    what the documented drift says about how far one tempo predicts another."""
    weights = [DRIFT_RHO**k for k in range(DRIFT_WINDOW)]
    shared = math.fsum(w * v for w, v in zip(weights, weights[abs(lag) :])) / math.fsum(w * w for w in weights)
    drift = 1 - PERSISTENT_SHARE - FRESH_SHARE
    return PERSISTENT_SHARE + drift * shared + (FRESH_SHARE if lag == 0 else 0.0)


def _latent(secret: int, tempo: int, subnet: str, param: str) -> float:
    """Standard normal: the persistent part, a moving average of the last
    :data:`DRIFT_WINDOW` tempos' noise (tempos before 0 count as noise too) and the
    tempo's fresh part."""
    lasting = _normal(f"{secret}:persistent:{subnet}:{param}")
    weights = [DRIFT_RHO**k for k in range(DRIFT_WINDOW)]
    norm = math.sqrt(math.fsum(w * w for w in weights))
    moving = math.fsum(w * _normal(f"{secret}:{tempo - k}:{subnet}:{param}") for k, w in enumerate(weights)) / norm
    fresh = _normal(f"{secret}:fresh:{tempo}:{subnet}:{param}")
    drift = 1 - PERSISTENT_SHARE - FRESH_SHARE
    return math.sqrt(PERSISTENT_SHARE) * lasting + math.sqrt(drift) * moving + math.sqrt(FRESH_SHARE) * fresh


def _normal(text: str) -> float:
    return _UNIT.inv_cdf(_open(_uniforms("dagnet world", text)[0]))


def _uniforms(*parts: object) -> tuple[float, float, float, float]:
    """Four uniforms in [0, 1) from sha256 of ``parts``."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    a, b, c, d = (int.from_bytes(digest[i : i + 8], "big") / 2**64 for i in range(0, 32, 8))
    return a, b, c, d


def _open(u: float) -> float:
    """``u`` moved off 0 so that ``inv_cdf`` is defined."""
    return min(max(u, 2**-60), 1 - 2**-53)


def _between(bounds: tuple[float, float], u: float) -> float:
    return bounds[0] + (bounds[1] - bounds[0]) * u


def _logistic(base: float, shift: float) -> float:
    return 1 / (1 + math.exp(-(math.log(base / (1 - base)) + shift)))


def _logit_shift(p: float, base: float) -> float:
    """The ``shift`` for which ``_logistic(base, shift) == p``."""
    p = min(max(p, 1e-12), 1 - 1e-12)
    return math.log(p / (1 - p)) - math.log(base / (1 - base))
