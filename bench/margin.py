"""`dagnet bench margin`: who is paid when miners are paid for beating the reference (issue 29).

Each of ``validators`` validators (secret 0, 1, …) plays ``tempos`` tempos of its own
hidden world with the curated and ``drawn`` drawn families on ``seeds`` hidden seeds per
tempo, as :func:`bench.world.play` does (full tier, owned execution, simulated clock). Per
instance it has each planner's S and plan digest (:func:`protocol.canonical.plan_digest`):

- ``good``: the shipped default; its S is also the validator's **reference** S (the
  validator runs ``good`` on the same instance, at the same tier, in the same world);
- ``naive+retries``: the hint follower with one retry per node;
- ``learner``: the example learner (``examples/learner-planner``), fed the feedback of its
  own runs after each tempo, one learner per validator's world;
- ``oracle N %``: a planner that plays the oracle's plan (``good`` planned on the world's
  truth, :func:`bench.world.oracle`) on some (family, tempo) pairs and ``good``'s on the
  rest. It sends valid plans and is scored like any miner: a legitimate planner. The pairs
  are a prefix, in a fixed hash order, of the length that brings its mean S over each
  validator's instances closest to ``N`` % above ``good``'s; its gain is measured, not assumed.

The networks are each validator's miners over its last ``window`` instances: per step
:func:`scoring.margin.credits` against the reference, then each miner's window means
into :func:`scoring.margin.margin_weights` without a burn uid (when nobody beats the
reference the floor group takes it all); ``burned`` is what the subnet owner's uid would
take instead when the validator burns (its owner's hotkey registered). Consensus: the validators' weights for the same network,
compared (same order, rank and weight differences), and one Yuma epoch
(:func:`chain.epoch.run_epoch`) over them with equal stake.
"""

from __future__ import annotations

import hashlib
import itertools
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from rich.console import Console

from chain.epoch import EpochInputs, run_epoch
from render.columns import ALWAYS, Column, fit_table
from protocol.canonical import plan_digest
from scoring.margin import Answer, margin_weights, network_means
from tasks import Family

from .tiers import bench_families
from .world import Played, hidden_seeds, load_learner, play, static_plans

__all__ = ["render_margin_bench", "run_margin_bench"]

GOOD, NAIVE, LEARNER, ORACLE = "good", "naive+retries", "learner", "oracle"
GAINS = {"oracle 3 %": 0.03, "oracle 1 %": 0.01}
"""The mixed planners and the gain in mean S over ``good`` each is tuned to."""
NETWORKS = (
    ("64 miners", 63, "oracle 3 %"),
    ("64 miners, learner", 63, LEARNER),
    ("8 miners", 7, "oracle 1 %"),
    ("8 miners, learner", 7, LEARNER),
    ("2 miners, both good", 2, None),
)
"""(name, copies of good, the better planner or ``None``); each is also played with a
naive+retries miner added."""
TARGETS = {"64 miners": 0.50, "8 miners": 0.30}
"""The better planner's least share of the emission (issue 29)."""
_OWNER = -1
"""The subnet owner's uid in the burning variant (a uid no miner has)."""
TIE = 1e-9
"""Weights closer than this are a tie when the validators' orders are compared."""


@dataclass(frozen=True, slots=True)
class Instance:
    """One hidden instance a validator scored: each strategy's S and plan digest."""

    validator: int
    tempo: int
    task_id: str
    seed: int
    scores: dict[str, float]
    digests: dict[str, str | None]

    @property
    def key(self) -> tuple[int, str, int]:
        return self.validator, self.task_id, self.tempo


Miner = Callable[[Instance], Answer]


def run_margin_bench(
    *, validators: int = 3, tempos: int = 4, seeds: int = 1, drawn: int = 12, window: int = 100,
    learner: str | None = None, families: Sequence[Family] = (),
) -> dict[str, Any]:
    """Every network on every validator's last window; see the module."""
    families = list(families) or bench_families(drawn, 0)
    static = static_plans(families)
    played: dict[int, list[Instance]] = {}
    has_learner = True
    for secret in range(validators):
        student = load_learner(learner)
        has_learner = has_learner and student is not None
        played[secret] = _instances(play(families, static, secret, tempos, seeds, student), secret, seeds)
    miners: dict[str, Miner] = {GOOD: _strategy(GOOD), NAIVE: _strategy(NAIVE)}
    if has_learner:
        miners[LEARNER] = _strategy(LEARNER)
    everything = [i for instances in played.values() for i in instances]
    for name, gain in GAINS.items():
        miners[name] = _mixed(frozenset().union(*(_oracle_pairs(instances, gain) for instances in played.values())))
    networks = [_network(name, copies, better, naive, played, miners, window)
                for name, copies, better in NETWORKS for naive in (False, True)
                if better is None or better in miners]
    return {"validators": validators, "tempos": tempos, "seeds": seeds, "drawn": drawn, "window": window,
            "families": len(families), "instances": len(everything), "learner": has_learner,
            "gains": {name: _gain(miner, played) for name, miner in miners.items() if name != GOOD},
            "networks": networks}


def _instances(plays: Iterable[Played], secret: int, seeds: int) -> list[Instance]:
    """The instances of ``plays`` in the order the validator scored them: tempo by tempo,
    within a tempo in the order of a hash of the validator's secret and the instance."""
    instances: list[Instance] = []
    for p in plays:
        digests = {s: plan_digest(proposal.plan) if proposal is not None else None for s, proposal in p.plans.items()}
        for k, seed in enumerate(hidden_seeds(p.tempo, seeds)):
            instances.append(Instance(secret, p.tempo, p.family.task_id, seed, {s: runs[k] for s, runs in p.scores.items()},
                                      digests))
    return sorted(instances, key=lambda i: (i.tempo, _hash(secret, i.task_id, i.seed)))


def _hash(*parts: Any) -> str:
    return hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()


def _strategy(name: str) -> Miner:
    return lambda i: Answer(i.digests[name], i.scores[name])


def _mixed(pairs: frozenset[tuple[int, str, int]]) -> Miner:
    """The oracle's answer on ``pairs``, ``good``'s elsewhere."""
    oracle, good = _strategy(ORACLE), _strategy(GOOD)
    return lambda i: oracle(i) if i.key in pairs else good(i)


def _oracle_pairs(instances: Sequence[Instance], gain: float) -> frozenset[tuple[int, str, int]]:
    """The prefix of one validator's (family, tempo) pairs, in the order of their hash,
    whose oracle plays lift its mean S over ``instances`` closest to ``gain`` above ``good``'s."""
    lift: dict[tuple[int, str, int], float] = {}
    for i in instances:
        lift[i.key] = lift.get(i.key, 0.0) + i.scores[ORACLE] - i.scores[GOOD]
    wanted = gain * sum(i.scores[GOOD] for i in instances)
    order = sorted(lift, key=lambda k: _hash(*k))
    lifted = list(itertools.accumulate((lift[key] for key in order), initial=0.0))
    length = min(range(len(lifted)), key=lambda k: abs(lifted[k] - wanted))
    return frozenset(order[:length])


def _gain(miner: Miner, played: dict[int, list[Instance]]) -> dict[str, Any]:
    """``miner``'s mean S over ``good``'s − 1, pooled and per validator, and how often it beats the reference."""
    def one(instances: Sequence[Instance]) -> dict[str, float]:
        mine = [miner(i).score for i in instances]
        good = [i.scores[GOOD] for i in instances]
        return {"mean_S": statistics.fmean(mine), "good_S": statistics.fmean(good),
                "gain": statistics.fmean(mine) / statistics.fmean(good) - 1,
                "beats": sum(m > g for m, g in zip(mine, good)) / len(mine)}

    return {"all": one([i for instances in played.values() for i in instances]),
            "per_validator": {str(v): one(instances) for v, instances in played.items()}}


def _network(
    name: str, copies: int, better: str | None, naive: bool, played: dict[int, list[Instance]],
    miners: dict[str, Miner], window: int,
) -> dict[str, Any]:
    """The network on each validator's last ``window`` instances, and the consensus over them."""
    roles = ([better] if better else []) + [GOOD] * copies + ([NAIVE] if naive else [])
    per_validator = {str(v): _window_weights(roles, instances[-window:], miners) for v, instances in played.items()}
    rows = [paid["weights"] for paid in per_validator.values()]
    return {"name": name + (" + naive+retries" if naive else ""), "base": name, "miners": len(roles), "better": better,
            "naive": naive, "roles": roles, "per_validator": per_validator,
            "shares": {v: _shares(roles, paid["weights"]) for v, paid in per_validator.items()},
            "consensus": _consensus(rows), "yuma": _yuma(roles, rows)}


def _window_weights(roles: Sequence[str], window: Sequence[Instance], miners: dict[str, Miner]) -> dict[str, Any]:
    """Credits per step against the reference (``good``'s S), window means, margin weights."""
    means = network_means(
        ({uid: miners[role](instance) for uid, role in enumerate(roles)}, instance.scores[GOOD]) for instance in window)
    result = margin_weights(means)
    burning = margin_weights(means, burn_uid=_OWNER)
    return {"weights": [result.weights.get(uid, 0.0) for uid in range(len(roles))], "payout": str(result.payout),
            "margin": [means[uid].margin for uid in range(len(roles))], "burned": burning.weights.get(_OWNER, 0.0)}


def _shares(roles: Sequence[str], weights: Sequence[float]) -> dict[str, Any]:
    """The better planner's share, one copy of good's, all copies', naive's."""
    copies = [w for role, w in zip(roles, weights) if role == GOOD]
    better = weights[0] if roles[0] != GOOD else None
    naive = weights[-1] if roles[-1] == NAIVE else None
    return {"better": better, "copy": copies[-1], "copies": sum(copies), "naive": naive,
            "naive_below_copy": None if naive is None else naive < min(copies)}


def _ranks(weights: Sequence[float]) -> list[int]:
    """Competition ranks (1 = largest), weights within :data:`TIE` tied."""
    return [1 + sum(other > w + TIE for other in weights) for w in weights]


def _consensus(rows: Sequence[Sequence[float]]) -> dict[str, Any]:
    """Whether every validator orders the miners alike (ties within :data:`TIE`), and the
    largest rank and weight difference between any two of them for one miner."""
    ranks = [_ranks(row) for row in rows]
    pairs = [(a, b) for a in range(len(rows)) for b in range(a + 1, len(rows))]
    return {"same_order": all(ranks[a] == ranks[b] for a, b in pairs),
            "max_rank_diff": max((abs(x - y) for a, b in pairs for x, y in zip(ranks[a], ranks[b])), default=0),
            "max_weight_diff": max((abs(x - y) for a, b in pairs for x, y in zip(rows[a], rows[b])), default=0.0)}


def _yuma(roles: Sequence[str], rows: Sequence[Sequence[float]]) -> dict[str, Any]:
    """One epoch with the validators (uids 0 …, equal stake) setting ``rows`` on the miners after them."""
    validators, n = len(rows), len(rows) + len(roles)
    weights = np.zeros((n, n))
    weights[:validators, validators:] = np.asarray(rows)
    stake = np.array([1.0] * validators + [0.0] * len(roles))
    block = 1_000
    result = run_epoch(EpochInputs(
        block=block, stake=stake, weights=weights, bonds=np.zeros((n, n)), last_update=np.full(n, block),
        registered_at=np.zeros(n, dtype=int), validator_permit=stake > 0, last_epoch_block=0,
    ))
    incentive = [float(x) for x in result.incentive[validators:]]
    return {"vtrust": [float(x) for x in result.validator_trust[:validators]],
            "dividends": [float(x) for x in result.dividends[:validators]],
            "incentive": _shares(roles, incentive)}


def _cell(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _naive_cell(net: dict[str, Any]) -> str:
    below = [s["naive_below_copy"] for s in net["shares"].values()]
    return "-" if below[0] is None else "yes" if all(below) else "NO"


def _first(net: dict[str, Any]) -> dict[str, Any]:
    return net["shares"]["0"]


GAIN_COLUMNS = (
    Column("planner", lambda r: r["name"], keep=ALWAYS, justify="left"),
    Column("mean S", lambda r: f"{r['all']['mean_S']:.3f}", keep=ALWAYS),
    Column("good's", lambda r: f"{r['all']['good_S']:.3f}", keep=3),
    Column("gain", lambda r: f"{r['all']['gain']:+.1%}", keep=ALWAYS),
    Column("beats ref.", lambda r: f"{r['all']['beats']:.0%}", keep=2),
    Column("gain per validator", lambda r: " ".join(f"{g['gain']:+.1%}" for g in r["per_validator"].values()), keep=4),
)
NETWORK_COLUMNS = (
    Column("network", lambda n: n["name"], keep=ALWAYS, justify="left",
           short=lambda n: n["name"].replace("naive+retries", "naive").replace(", both good", "")),
    Column("better's", lambda n: _cell(_first(n)["better"]), keep=ALWAYS),
    Column("one copy", lambda n: _cell(_first(n)["copy"], 4), keep=ALWAYS),
    Column("copies", lambda n: _cell(_first(n)["copies"]), keep=5),
    Column("naive", lambda n: _cell(_first(n)["naive"], 4), keep=ALWAYS),
    Column("naive<copy", lambda n: _naive_cell(n), keep=8),
    Column("payout", lambda n: n["per_validator"]["0"]["payout"], keep=2),
    Column("burned", lambda n: _cell(n["per_validator"]["0"]["burned"]), keep=1),
)
"""The networks table, by importance: the shares the targets read are never dropped."""
CONSENSUS_COLUMNS = (
    NETWORK_COLUMNS[0],
    Column("same order", lambda n: "yes" if n["consensus"]["same_order"] else "NO", keep=ALWAYS),
    Column("Δrank", lambda n: str(n["consensus"]["max_rank_diff"]), keep=ALWAYS),
    Column("Δweight", lambda n: f"{n['consensus']['max_weight_diff']:.4f}", keep=ALWAYS),
    Column("vtrust", lambda n: " ".join(f"{v:.3f}" for v in n["yuma"]["vtrust"]), keep=ALWAYS),
    Column("dividends", lambda n: " ".join(f"{v:.3f}" for v in n["yuma"]["dividends"]), keep=3),
    Column("incentive: better", lambda n: _cell(n["yuma"]["incentive"]["better"]), keep=5),
    Column("copy", lambda n: _cell(n["yuma"]["incentive"]["copy"], 4), keep=4),
    Column("naive", lambda n: _cell(n["yuma"]["incentive"]["naive"], 4), keep=2),
)
"""Consensus: the validators compared, then one Yuma epoch over their weights."""


def render_margin_bench(result: dict[str, Any], console: Console) -> None:
    gains = [{"name": name, **gain} for name, gain in result["gains"].items()]
    console.print(fit_table(GAIN_COLUMNS, gains, console.width, title=(
        f"{result['validators']} validators × {result['tempos']} tempos × {result['families']} families × "
        f"{result['seeds']} hidden seed(s): mean S against the reference (good)")))
    console.print(fit_table(NETWORK_COLUMNS, result["networks"], console.width, title=(
        f"shares of the emission over validator 0's last {result['window']} instances")))
    console.print(fit_table(CONSENSUS_COLUMNS, result["networks"], console.width, title=(
        f"{result['validators']} validators: same order, largest rank and weight difference; one Yuma epoch "
        "(equal stake): vtrust, dividends and incentive")))
    for target, misses in margin_targets(result):
        console.print(f"target: {target}: " + ("ok" if not misses else "miss: " + ", ".join(misses)), highlight=False)


def margin_targets(result: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """Issue 29's targets, each with the (network, validator) pairs that miss it."""
    def misses(holds: Callable[[dict[str, Any], dict[str, Any]], bool], nets: Sequence[dict[str, Any]]) -> list[str]:
        return [f"{net['name']} (validator {v})" for net in nets for v, s in net["shares"].items() if not holds(net, s)]

    networks = result["networks"]
    return [
        *((f"the better planner of '{base}' takes ≥ {least:.0%}",
           misses(lambda _, s, least=least: s["better"] >= least, [n for n in networks if n["base"].startswith(base)]))
          for base, least in TARGETS.items()),
        ("2 miners both good: 0.5 / 0.5", misses(lambda _, s: abs(s["copy"] - 0.5) < 1e-9,
                                                   [n for n in networks if n["better"] is None and not n["naive"]])),
        ("naive below a good copy", misses(lambda _, s: bool(s["naive_below_copy"]), [n for n in networks if n["naive"]])),
        ("no validator clipped to zero", [n["name"] for n in networks if min(n["yuma"]["vtrust"]) <= 0]),
    ]
