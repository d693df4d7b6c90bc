"""`dagnet bench margin`: who is paid when miners are paid for beating the validator's
reference, and whether the attacks of issue 35 pay (docs/scoring.md).

Each of ``validators`` validators (secrets ``first_secret``, the next, …) plays ``tempos``
tempos of its own hidden world, ``per_tempo`` of the curated and ``drawn`` drawn families
a tempo (all of them by default; fewer, a different draw of them each tempo) on ``seeds``
hidden seeds per tempo, as
:func:`bench.world.play` plays them (full tier, owned execution, simulated clock, calls
on common random numbers; each instance's S the mean over ``draws`` draws of the tempo's
world, as a validator's margins are), and with its strategies.
Per instance it has each planner's S, plan digest (:func:`protocol.canonical.plan_digest`)
and outcome key. The yardstick is the validator's own:

- ``reference``: ``good`` on the forecast of the tempo's world from the worlds published
  before it, 10 retries a node (:func:`planners.public.reference_plan`); its S on the
  instance is the **reference** S every margin is taken over. It is no miner in the gains
  table; networks send copies of its plan (any miner can make it from the published worlds).

Every miner is a real planner, sending its own plan on every instance:

- ``good``: the shipped default on the advertised profile; ``good+10``: its plan declaring
  10 retries on every node (both as :func:`bench.world.static_plans` makes them);
- ``public``: ``good`` on the last published world, 10 retries a node, no feedback: a
  planner built only on public information;
- ``naive+retries``: the hint follower with one retry per node;
- ``learner``: the example learner (``examples/learner-planner``), fed the feedback of its
  own runs after each tempo, one learner per validator's world;
- ``oracle``: ``good`` planned on the world's truth (:func:`bench.world.oracle`), declaring
  the retries each subnet needs: a planner that knows the world;
- copiers' disguises (:func:`planners.attackers.disguised`): ``reference renamed`` (renamed
  nodes, reversed, a ``max_parallel`` that never binds), ``learner renamed``, ``learner mp1``
  and ``learner mp2`` (the learner's plan renamed, ``max_parallel`` 1 and 2), and the same
  three of the oracle's plan.

Each network (:data:`NETWORKS`; uids in first-commit order, the first role registered
first) is paid on each validator's window, the instances of its last ``worlds`` tempos,
exactly as a validator pays it (:func:`scoring.margin.network_pay`: margins over the
reference, copies and variants by first commit, margins clear of their standard error
counted in worlds), without a burn uid (when nobody
beats the reference the floor group takes it all), and again with the owner's uid
registered, as live subnets burn (``burned``: what it takes; a non-beater then earns at
most the floor, which is what the targets' "at most the floor" reads). Consensus: one
Yuma epoch (:func:`chain.epoch.run_epoch`, equal stake) over the validators' weights
without a burn uid. The copy targets are played with the learner and with the oracle as
the planner copied; each means something only where that planner beats the reference:
on a validator where it does not, they say so (n/a), never pass.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from rich.console import Console

from chain.epoch import EpochInputs, run_epoch
from planners import PlanProposal
from planners.attackers import disguised
from protocol.canonical import plan_digest
from protocol.plan import WorkflowPlan
from render.columns import ALWAYS, Column, fit_table
from scoring.margin import FLOOR, K_SE, WORLDS, Answer, network_pay
from scoring.worlds import clustered, tallies
from tasks import Family
from validator.draws import MOST_DRAWS

from .progress import Steps
from .tiers import bench_families
from .world import Derive, Played, draw_order, hidden_seeds, load_learner, play, static_plans

__all__ = ["render_margin_bench", "run_margin_bench"]

REFERENCE, PUBLIC = "reference", "public"
GOOD, NAIVE, LEARNER, ORACLE = "good", "naive+retries", "learner", "oracle"
RETRIED, REF_RENAMED = "good+10", "reference renamed"
L_RENAMED, L_MP1, L_MP2 = "learner renamed", "learner mp1", "learner mp2"
O_RENAMED, O_MP1, O_MP2 = "oracle renamed", "oracle mp1", "oracle mp2"
_OWNER = -1
"""The subnet owner's uid in the burning variant (a uid no miner has)."""
TIE = 1e-9
"""Weights closer than this are a tie when the validators' orders are compared."""


def _derive(source: str, change: Callable[[WorkflowPlan], WorkflowPlan]) -> Derive:
    def derive(plans: Mapping[str, PlanProposal | None]) -> PlanProposal | None:
        proposal = plans.get(source)
        return None if proposal is None else replace(proposal, plan=change(proposal.plan))

    return derive


def _renamed(source: str) -> Derive:
    """``source``'s plan renamed, reversed, with a ``max_parallel`` that never binds."""
    return _derive(source, lambda plan: disguised(plan, len(plan.nodes) + 3))


def _variants(source: str, renamed: str, mp1: str, mp2: str) -> dict[str, Derive]:
    """A copier's three disguises of ``source``'s plan: renamed (:func:`_renamed`), renamed
    with ``max_parallel`` 1, and with 2."""
    return {
        renamed: _renamed(source),
        mp1: _derive(source, lambda plan: disguised(plan, 1)),
        mp2: _derive(source, lambda plan: disguised(plan, 2)),
    }


DERIVED: dict[str, Derive] = {
    REF_RENAMED: _renamed(REFERENCE),
    **_variants(ORACLE, O_RENAMED, O_MP1, O_MP2),
}
LEARNER_DERIVED: dict[str, Derive] = _variants(LEARNER, L_RENAMED, L_MP1, L_MP2)


@dataclass(frozen=True, slots=True)
class Network:
    name: str
    roles: tuple[str, ...]
    """Each uid's planner, in first-commit order."""
    needs_learner: bool = False


def _net(name: str, *parts: tuple[str, int]) -> Network:
    roles = tuple(role for role, count in parts for _ in range(count))
    return Network(name, roles, any(r.startswith(LEARNER) for r in roles))


NETWORKS = (
    _net("good+10 beside 8 good", (RETRIED, 1), (GOOD, 8)),
    _net("public beside 8 reference", (PUBLIC, 1), (REFERENCE, 8)),
    _net("learner on 1 hotkey", (LEARNER, 1), (REFERENCE, 7)),
    _net("learner on 4 hotkeys", (LEARNER, 1), (L_RENAMED, 1), (L_MP1, 1), (L_MP2, 1), (REFERENCE, 7)),
    _net("learner + 4 copies + 1 variant", (LEARNER, 5), (L_MP1, 1), (REFERENCE, 7)),
    _net("64 identical learners", (LEARNER, 64)),
    _net("4 renamed reference beside 50 reference", (REFERENCE, 50), (REF_RENAMED, 4)),
    _net("oracle beside 63 reference", (ORACLE, 1), (REFERENCE, 63)),
    _net("oracle on 4 hotkeys", (ORACLE, 1), (O_RENAMED, 1), (O_MP1, 1), (O_MP2, 1), (REFERENCE, 7)),
    _net("oracle + 4 copies + 1 variant", (ORACLE, 5), (O_MP1, 1), (REFERENCE, 7)),
    _net("64 identical oracles", (ORACLE, 64)),
    _net("oracle + learner + 8 good + naive", (ORACLE, 1), (LEARNER, 1), (GOOD, 8), (NAIVE, 1)),
    _net("2 reference + naive", (REFERENCE, 2), (NAIVE, 1)),
)
"""The networks, each role a real planner's plan: the reference's copies are what a miner
that adds nothing to the published past sends."""


@dataclass(frozen=True, slots=True)
class Instance:
    """One hidden instance a validator scored: each strategy's answer."""

    validator: int
    tempo: int
    task_id: str
    seed: int
    answers: dict[str, Answer]


def run_margin_bench(
    *,
    validators: int = 3,
    first_secret: int = 0,
    tempos: int = 24,
    per_tempo: int | None = None,
    seeds: int = 1,
    drawn: int = 12,
    worlds: int = WORLDS,
    k_se: float = K_SE,
    learner: str | None = None,
    families: Sequence[Family] = (),
    steps: Steps | None = None,
    draws: int | None = None,
) -> dict[str, Any]:
    """Every network on every validator's window (its last ``worlds`` tempos), margins
    clearing ``k_se`` standard errors (validators: :data:`scoring.margin.K_SE`) on each
    instance's mean over ``draws`` draws of the world (``None``: :data:`validator.draws.MOST_DRAWS`, the most a validator
    makes); see the module. ``steps`` hears the static planning, then each family played."""
    steps = steps or Steps()
    draws = MOST_DRAWS if draws is None else draws
    families = list(families) or bench_families(drawn, 0)
    static = static_plans(families, steps)
    played: dict[int, list[Instance]] = {}
    has_learner = True
    secrets = range(first_secret, first_secret + validators)
    played_per_tempo = len(families) if per_tempo is None else min(per_tempo, len(families))
    steps.phase(
        f"{validators} validator(s) × {tempos} tempos × {played_per_tempo} families",
        validators * tempos * played_per_tempo,
    )
    for secret in secrets:
        student = load_learner(learner)
        has_learner = has_learner and student is not None
        derived = DERIVED | (LEARNER_DERIVED if student is not None else {})
        played[secret] = _instances(
            steps.each(
                play(
                    families, static, secret, tempos, seeds, student, derived=derived, draws=draws, per_tempo=per_tempo
                )
            ),
            secret,
            seeds,
        )
    strategies = sorted({s for instances in played.values() for i in instances for s in i.answers} - {REFERENCE})
    windows = {v: _window(instances, worlds) for v, instances in played.items()}
    networks = [_network(net, windows, k_se) for net in NETWORKS if has_learner or not net.needs_learner]
    return {
        "validators": validators,
        "secrets": list(secrets),
        "tempos": tempos,
        "per_tempo": played_per_tempo,
        "seeds": seeds,
        "drawn": drawn,
        "worlds": worlds,
        "window": len(next(iter(windows.values()), [])),
        "k_se": k_se,
        "draws": draws,
        "families": len(families),
        "learner": has_learner,
        "instances": sum(len(i) for i in played.values()),
        "gains": {name: _gain(name, played, windows) for name in strategies},
        "networks": networks,
    }


def _instances(plays: Iterable[Played], secret: int, seeds: int) -> list[Instance]:
    """The instances of ``plays`` in the order the validator scored them: tempo by tempo,
    within a tempo in the order of a hash of the validator's secret and the instance."""
    instances: list[Instance] = []
    for p in plays:
        digests = {s: plan_digest(proposal.plan) if proposal is not None else None for s, proposal in p.plans.items()}
        for k, seed in enumerate(hidden_seeds(p.tempo, seeds)):
            answers = {s: Answer(digests[s], runs[k], p.outcomes[s][k]) for s, runs in p.scores.items()}
            instances.append(Instance(secret, p.tempo, p.family.task_id, seed, answers))
    return sorted(instances, key=lambda i: (i.tempo, draw_order(secret, i.task_id, i.seed)))


def _window(instances: Sequence[Instance], worlds: int) -> list[Instance]:
    """A validator's window: the instances of its last ``worlds`` tempos."""
    kept = sorted({i.tempo for i in instances})[-worlds:]
    return [i for i in instances if i.tempo in kept]


def _gain(name: str, played: dict[int, list[Instance]], windows: dict[int, list[Instance]]) -> dict[str, Any]:
    """``name``'s mean S over the reference's − 1 (all instances), how often it beats the
    reference and how often its plan is not the reference's, and over each validator's window its mean margin, the per-step SD of the
    margin and the window's standard error counted in worlds (:mod:`scoring.worlds`)."""

    def one(instances: Sequence[Instance]) -> dict[str, float]:
        mine = [i.answers[name].score for i in instances]
        ref = [i.answers[REFERENCE].score for i in instances]
        margins = [m - r for m, r in zip(mine, ref)]
        sd = statistics.stdev(margins) if len(margins) > 1 else 0.0
        _, se, _ = clustered(tallies(margins, [i.tempo for i in instances]))
        return {
            "mean_S": statistics.fmean(mine),
            "reference_S": statistics.fmean(ref),
            "gain": statistics.fmean(mine) / statistics.fmean(ref) - 1,
            "beats": sum(m > 0 for m in margins) / len(margins),
            "changed": sum(i.answers[name].digest != i.answers[REFERENCE].digest for i in instances) / len(instances),
            "margin": statistics.fmean(margins),
            "sd": sd,
            "se": se,
        }

    return {
        "all": one([i for instances in played.values() for i in instances]),
        "per_validator": {str(v): one(window) for v, window in windows.items()},
    }


def _network(net: Network, windows: dict[int, list[Instance]], k_se: float = K_SE) -> dict[str, Any]:
    """The network on each validator's window, and the consensus over them."""
    per_validator = {str(v): _window_weights(net.roles, window, k_se) for v, window in windows.items()}
    rows = [paid["weights"] for paid in per_validator.values()]
    return {
        "name": net.name,
        "roles": list(net.roles),
        "miners": len(net.roles),
        "per_validator": per_validator,
        "by_role": {v: _by_role(net.roles, paid["weights"]) for v, paid in per_validator.items()},
        "by_role_burning": {v: _by_role(net.roles, paid["burning"]) for v, paid in per_validator.items()},
        "consensus": _consensus(rows),
        "yuma": _yuma(net.roles, rows),
    }


def _window_weights(roles: Sequence[str], window: Sequence[Instance], k_se: float = K_SE) -> dict[str, Any]:
    """The validator's pay over ``window`` (uids in role order, first committed first), and
    with the owner's uid burning: each uid's weight, and whether it beats the reference
    (a group leader whose margin is clear of its error)."""
    steps = [
        (k, {uid: i.answers[role] for uid, role in enumerate(roles)}, i.answers[REFERENCE].score)
        for k, i in enumerate(window)
    ]
    worlds = {k: i.tempo for k, i in enumerate(window)}
    pay = network_pay(steps, k_se=k_se, worlds=worlds)
    burning = network_pay(steps, burn_uid=_OWNER, k_se=k_se, worlds=worlds)
    n = len(roles)
    return {
        "weights": [pay.paid.weights.get(uid, 0.0) for uid in range(n)],
        "payout": str(pay.paid.payout),
        "margin": [pay.means[uid].margin for uid in range(n)],
        "clear": [pay.means[uid].clear for uid in range(n)],
        "leaders": [pay.leaders[uid] for uid in range(n)],
        "beater": [pay.leaders[uid] == uid and pay.means[uid].clear > 0 for uid in range(n)],
        "burning": [burning.paid.weights.get(uid, 0.0) for uid in range(n)],
        "burned": burning.paid.weights.get(_OWNER, 0.0),
    }


def _by_role(roles: Sequence[str], weights: Sequence[float]) -> dict[str, Any]:
    """Per role: the first uid's weight, and all of that role's uids together."""
    first: dict[str, float] = {}
    total: dict[str, float] = {}
    for role, weight in zip(roles, weights):
        first.setdefault(role, weight)
        total[role] = total.get(role, 0.0) + weight
    return {"first": first, "total": total}


def _ranks(weights: Sequence[float]) -> list[int]:
    """Competition ranks (1 = largest), weights within :data:`TIE` tied."""
    return [1 + sum(other > w + TIE for other in weights) for w in weights]


def _consensus(rows: Sequence[Sequence[float]]) -> dict[str, Any]:
    """Whether every validator orders the miners alike (ties within :data:`TIE`), and the
    largest rank and weight difference between any two of them for one miner."""
    ranks = [_ranks(row) for row in rows]
    pairs = [(a, b) for a in range(len(rows)) for b in range(a + 1, len(rows))]
    return {
        "same_order": all(ranks[a] == ranks[b] for a, b in pairs),
        "max_rank_diff": max((abs(x - y) for a, b in pairs for x, y in zip(ranks[a], ranks[b])), default=0),
        "max_weight_diff": max((abs(x - y) for a, b in pairs for x, y in zip(rows[a], rows[b])), default=0.0),
    }


def _yuma(roles: Sequence[str], rows: Sequence[Sequence[float]]) -> dict[str, Any]:
    """One epoch with the validators (uids 0 …, equal stake) setting ``rows`` on the miners after them."""
    validators, n = len(rows), len(rows) + len(roles)
    weights = np.zeros((n, n))
    weights[:validators, validators:] = np.asarray(rows)
    stake = np.array([1.0] * validators + [0.0] * len(roles))
    block = 1_000
    result = run_epoch(
        EpochInputs(
            block=block,
            stake=stake,
            weights=weights,
            bonds=np.zeros((n, n)),
            last_update=np.full(n, block),
            registered_at=np.zeros(n, dtype=int),
            validator_permit=stake > 0,
            last_epoch_block=0,
        )
    )
    incentive = [float(x) for x in result.incentive[validators:]]
    return {
        "vtrust": [float(x) for x in result.validator_trust[:validators]],
        "dividends": [float(x) for x in result.dividends[:validators]],
        "incentive": _by_role(roles, incentive),
    }


def _cell(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _first(net: Mapping[str, Any], key: str) -> Any:
    """``net[key]`` of the first validator."""
    return next(iter(net[key].values()))


def _roles_cell(net: Mapping[str, Any]) -> str:
    """Each role's total weight on the first validator (the first uid's when it differs)."""
    by = _first(net, "by_role")
    parts = []
    for role, total in by["total"].items():
        first = by["first"][role]
        parts.append(f"{role} {total:.3f}" + (f" (first {first:.3f})" if abs(first - total) > 1e-9 else ""))
    return ", ".join(parts)


GAIN_COLUMNS = (
    Column("planner", lambda r: r["name"], keep=ALWAYS, justify="left"),
    Column("mean S", lambda r: f"{r['all']['mean_S']:.3f}", keep=ALWAYS),
    Column("ref.'s", lambda r: f"{r['all']['reference_S']:.3f}", keep=3),
    Column("gain", lambda r: f"{r['all']['gain']:+.1%}", keep=ALWAYS),
    Column("beats ref.", lambda r: f"{r['all']['beats']:.0%}", keep=2),
    Column("plan ≠ ref.", lambda r: f"{r['all']['changed']:.0%}", keep=2),
    Column(
        "window margin ± SE per validator",
        lambda r: " ".join(f"{g['margin']:+.3f}±{g['se']:.3f}" for g in r["per_validator"].values()),
        keep=ALWAYS,
    ),
    Column("step SD", lambda r: f"{r['all']['sd']:.3f}", keep=4),
)
NETWORK_COLUMNS = (
    Column("network", lambda n: n["name"], keep=ALWAYS, justify="left"),
    Column("weights by planner (first validator; total, first uid)", _roles_cell, keep=ALWAYS, justify="left"),
    Column("payout", lambda n: _first(n, "per_validator")["payout"], keep=2),
    Column("burned", lambda n: _cell(_first(n, "per_validator")["burned"]), keep=1),
    Column("vtrust", lambda n: " ".join(f"{v:.3f}" for v in n["yuma"]["vtrust"]), keep=ALWAYS),
)


def render_margin_bench(result: dict[str, Any], console: Console) -> None:
    gains = [{"name": name, **gain} for name, gain in result["gains"].items()]
    secrets = result["secrets"]
    console.print(
        fit_table(
            GAIN_COLUMNS,
            gains,
            console.width,
            title=(
                f"{result['validators']} validators (secrets {secrets[0]}–{secrets[-1]}) × {result['tempos']} tempos × "
                f"{result['per_tempo']}/{result['families']} families × {result['seeds']} seed(s): S against the reference "
                "(good on the forecast from the published worlds)"
            ),
        )
    )
    console.print(
        fit_table(
            NETWORK_COLUMNS,
            result["networks"],
            console.width,
            title=(
                f"weights over each validator's last {result['worlds']} worlds ({result['window']} instances),"
                f" margins clear of {result['k_se']:g} SE counted in worlds; one Yuma epoch (equal stake)"
            ),
        )
    )
    targets = margin_targets(result)
    for target in targets:
        console.print(f"target: {target.name}: {target.verdict()}", highlight=False, soft_wrap=True)
    console.print(targets_line(targets), highlight=False, soft_wrap=True)


@dataclass(frozen=True, slots=True)
class Target:
    """One of issue 35's targets: the (network, validator) pairs that miss it, and those
    where it says nothing (``na``, each with why: the learner does not beat the reference
    there, so what it earns beside its copies is the floor's, whatever they do)."""

    name: str
    misses: list[str]
    na: list[str] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        return not self.misses and not self.na

    def verdict(self) -> str:
        parts = ([f"miss: {', '.join(self.misses)}"] if self.misses else []) + (
            [f"n/a: {', '.join(self.na)}"] if self.na else []
        )
        return "; ".join(parts) or "ok"


def targets_line(targets: Sequence[Target]) -> str:
    """The bench's last line: how many of the targets hold, which miss and which say nothing."""
    missed = [t.name for t in targets if t.misses]
    na = [t.name for t in targets if t.na and not t.misses]
    return (
        f"targets: {sum(t.holds for t in targets)} of {len(targets)} hold"
        + (f"; missed: {'; '.join(missed)}" if missed else "")
        + (f"; n/a: {'; '.join(na)}" if na else "")
    )


def margin_targets(result: dict[str, Any]) -> list[Target]:
    """Issue 35's targets, each with the (network, validator) pairs that miss it. The copy
    targets are played twice, with the learner and with the oracle as the honest planner
    copied, each only on the validators where that planner beats the reference alone."""
    nets = {n["name"]: n for n in result["networks"]}
    validators = [str(v) for v in result["secrets"]]
    alone = {LEARNER: nets.get("learner on 1 hotkey", {}), ORACLE: nets.get("oracle beside 63 reference", {})}

    def beats(net: dict[str, Any], v: str, role: str) -> bool:
        """Whether ``role``'s first uid beats the reference on validator ``v``."""
        return bool(net["per_validator"][v]["beater"][net["roles"].index(role)])

    def each(target: str, name: str, holds: Callable[[dict[str, Any], str], bool], *, honest: str = "") -> Target:
        """``target`` on network ``name``; with ``honest``, n/a where that planner is no beater alone."""
        net = nets.get(name)
        if net is None:
            return Target(target, [], [f"{name} not played (no learner loaded)"])
        na = [v for v in validators if honest and not (alone[honest] and beats(alone[honest], v, honest))]
        misses = [f"{name} (validator {v})" for v in validators if v not in na and not holds(net, v)]
        return Target(target, misses, [f"the {honest} is not a beater on validator {', '.join(na)}"] if na else [])

    def total(net: dict[str, Any], v: str, *roles: str, burning: bool = False) -> float:
        by = net["by_role_burning" if burning else "by_role"][v]["total"]
        return math.fsum(by.get(role, 0.0) for role in roles)

    def at_most_floor(*roles: str) -> Callable[[dict[str, Any], str], bool]:
        return lambda net, v: total(net, v, *roles, burning=True) <= FLOOR + 1e-12

    def first(net: dict[str, Any], v: str, role: str) -> float:
        return float(net["by_role"][v]["first"][role])

    def copied(honest: str) -> list[Target]:
        """The three copy targets with ``honest`` the planner copied."""

        def one_vs_four(net: dict[str, Any], v: str) -> bool:
            four = net["by_role"][v]["total"]
            hers = math.fsum(w for role, w in four.items() if role.startswith(honest))
            return hers <= 1.05 * total(alone[honest], v, honest) + 1e-12

        def keeps(net: dict[str, Any], v: str) -> bool:
            return first(net, v, honest) >= 0.9 * first(alone[honest], v, honest)

        def first_takes_all(net: dict[str, Any], v: str) -> bool:
            paid = net["per_validator"][v]
            return paid["payout"] == "margin" and paid["weights"][0] >= 1 - 1e-9 and paid["burned"] == 0.0

        return [
            each(
                f"one {honest} on 4 hotkeys earns ≤ 1.05 × on one", f"{honest} on 4 hotkeys", one_vs_four, honest=honest
            ),
            each(
                f"an honest {honest} keeps ≥ 90 % beside 4 copies + 1 variant",
                f"{honest} + 4 copies + 1 variant",
                keeps,
                honest=honest,
            ),
            each(
                f"64 identical {honest}s: the first takes the beaters' share, nothing burned",
                f"64 identical {honest}s",
                first_takes_all,
                honest=honest,
            ),
        ]

    return [
        each("good+10 is not a beater: at most the floor", "good+10 beside 8 good", at_most_floor(RETRIED)),
        each("public is not a beater: at most the floor", "public beside 8 reference", at_most_floor(PUBLIC)),
        *copied(LEARNER),
        *copied(ORACLE),
        each(
            "4 renamed reference copies beside 50 reference copies: all 54 at most the floor",
            "4 renamed reference beside 50 reference",
            at_most_floor(REFERENCE, REF_RENAMED),
        ),
        each(
            "the oracle is paid as a beater by every validator",
            "oracle beside 63 reference",
            lambda n, v: beats(n, v, ORACLE) and first(n, v, ORACLE) >= 0.5,
        ),
        _real_beater(result, nets.get("learner on 1 hotkey"), validators, beats),
        each(
            "naive below the reference's first copy",
            "2 reference + naive",
            lambda n, v: first(n, v, NAIVE) < first(n, v, REFERENCE),
        ),
        Target(
            "vtrust ≥ 0.95 for every validator in every network",
            [n["name"] for n in result["networks"] if min(n["yuma"]["vtrust"]) < 0.95],
        ),
    ]


REAL_GAIN, MOST = 0.02, 0.5
"""A real planner's target: at least 2 % better in mean S, its plan not the reference's on
more than half the instances (a planner that plans, not one that sends the reference's
plan and differs on a chosen few)."""


def _real_beater(
    result: dict[str, Any],
    net: dict[str, Any] | None,
    validators: Sequence[str],
    beats: Callable[[dict[str, Any], str, str], bool],
) -> Target:
    """Issue 35's "a real planner ≥ 2 % better that changes its plan on most steps is paid as
    a beater by every validator", read on the learner alone beside reference copies: n/a
    when the learner is less than that."""
    name = "a real planner ≥ 2 % better, its plan changed on most instances, is paid as a beater by every validator"
    gain = result["gains"].get(LEARNER, {}).get("all")
    if net is None or gain is None:
        return Target(name, [], ["no learner loaded"])
    what = f"the learner ({gain['gain']:+.1%}, plan changed on {gain['changed']:.0%})"
    if gain["gain"] < REAL_GAIN or gain["changed"] <= MOST:
        return Target(name, [], [f"{what} is not such a planner"])
    return Target(name, [f"{what} (validator {v})" for v in validators if not beats(net, v, LEARNER)])
