"""`dagnet bench tasks --tiers`: how much planning pays, per hint tier and task type.

Every family (the curated ones and ``drawn`` families drawn from the grammar with
``secret``, tempo 0) is sent at each hint tier (``protocol.hints``: ``full``,
``outline``, ``goal``) and planned by ``good``, ``naive`` and ``naive+retries``; each plan
runs on the hidden instances of ``seeds`` consecutive seeds exactly as a validator runs
it (owned execution, simulated clock) and is scored. A strategy that cannot plan a tier
(``naive`` without step hints) scores 0 there, as a miner that answers nothing would.

The **oracle** is the best plan known for the instance: the family's own programs (its
full-tier steps, and the generator's shorter ``program`` where the family has one — a
code module that works its derived constants out itself) and each program ``good`` finds for the family
(at the full tier, where it takes the hinted program or a shorter one it found, and at
``outline`` and ``goal``, where it searches), each put on the best subnets for the
profile — every assignment of one allowed subnet per kind is weighed by the score's own
terms (``W_COST`` per share of the budget, ``W_LATENCY`` per share of the latency limit,
the retries each subnet's known failures need) and the best is run — and ``good``'s own
runs at every tier; per seed the oracle keeps the best of them. It does not depend on
the tier and is never below ``good``. **Headroom** is oracle − good: what a better
planner could still win at that tier.

The seeds are hidden ones only (:func:`hidden_seeds`): ``seeds`` consecutive seeds from
``seed``, skipping every public example's seed (``0`` and the 64-bit ones), which ``good``
fits by construction.

Per tier and type the table gives the mean of each family's median S over the seeds,
the share of ``good``'s runs that solved their instance (completed with quality 1), the
headroom, and the weights ``normalize_weights`` gives one good miner against one
naive-with-retries miner.
"""

from __future__ import annotations

import graphlib
import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console

from planners import GoodPlanner, PlanningError, PlanProposal
from protocol.documents import PlanDocument
from protocol.hints import TIERS, HintTier
from protocol.outcomes import RunStatus
from protocol.plan import ErrorPolicy, WorkflowPlan
from protocol.score_weights import W_COST, W_LATENCY
from protocol.synapse import TaskPackage
from protocol.task import Task, at_tier
from render.columns import ALWAYS, Column, fit_table
from tasks import Family, load_families
from tasks.seed import EXAMPLE_SEED

from .tasks import _bounded, dry_run, network_weights, propose

__all__ = ["hidden_seeds", "render_tiers_bench", "run_tiers_bench"]

REFERENCE_PLANNERS = ("good", "naive", "naive+retries")
ORACLE = "oracle"
RATIO_TARGET = 3.0
"""good's weight over naive-with-retries' in a 2-miner network, on every type and tier."""
SOLVED_TARGET = 0.8
"""Share of goal instances good must solve, per type."""
_RETRY_PAD = 1  # good's spare retry (planners/good.py)


def bench_families(drawn: int, secret: int) -> list[Family]:
    """The curated families, then ``drawn`` families of tempo 0 drawn with ``secret``."""
    families = list(load_families())
    if drawn:
        from tasks.drawn import drawn_families

        families += drawn_families(secret, 0, drawn)
    return families


async def _run(proposal: PlanProposal | None, task: Task) -> dict[str, Any]:
    """The run of ``proposal`` on ``task`` (S 0 and ``planning`` when there is none)."""
    if proposal is None:
        return {"S": 0.0, "solved": False, "status": "no plan"}
    document = PlanDocument(proposal.plan, proposal.total_estimated_cost, "synapse")
    report = await dry_run(document, task)
    score = report["score"]
    solved = report["status"] == RunStatus.COMPLETED and score["output_quality"] >= 1.0
    return {"S": score["S"], "solved": solved, "status": report["status"]}


def _propose(family: Family, package: TaskPackage, strategy: str) -> PlanProposal | None:
    try:
        return propose(Family(package, family.generate), strategy)
    except PlanningError:
        return None


def oracle_plan(package: TaskPackage, plan: WorkflowPlan) -> WorkflowPlan:
    """``plan`` (the full tier's program) with each kind on the allowed subnet that the
    score's cost and latency terms favour most, over every assignment of one subnet per kind."""
    tools = package.available_tools
    allowed = package.constraints.allowed_subnets or list(tools)
    kinds = sorted({tools[node.subnet].type for node in plan.nodes})
    offers = [[name for name in allowed if tools[name].type == kind] for kind in kinds]
    best = min(itertools.product(*offers), key=lambda choice: _loss(package, plan, dict(zip(kinds, choice))))
    return _assigned(package, plan, dict(zip(kinds, best)))


def _assigned(package: TaskPackage, plan: WorkflowPlan, subnet_of: dict[str, str]) -> WorkflowPlan:
    tools = package.available_tools
    nodes, policies = [], dict(plan.error_handling)
    for node in plan.nodes:
        subnet = subnet_of[tools[node.subnet].type]
        info = tools[subnet]
        nodes.append(
            node.model_copy(
                update={
                    "subnet": subnet,
                    "estimated_cost": info.avg_cost * (1 + info.fail_first),
                    "estimated_latency": info.avg_latency * (1 + info.fail_first),
                }
            )
        )
        old = policies.get(node.id, ErrorPolicy())
        policies[node.id] = old.model_copy(update={"retry_count": min(10, info.fail_first + _RETRY_PAD)})
    return plan.model_copy(update={"nodes": nodes, "error_handling": policies})


def _loss(package: TaskPackage, plan: WorkflowPlan, subnet_of: dict[str, str]) -> float:
    """``W_COST`` × cost ÷ budget + ``W_LATENCY`` × critical path ÷ latency limit, by the
    profile's prices and latencies with each subnet's known failures retried."""
    tools, route = package.available_tools, package.route
    limits = package.constraints
    cost, finish = 0.0, dict[str, float]()
    preds: dict[str, set[str]] = {node.id: set() for node in plan.nodes}
    for edge in plan.edges:
        preds[edge.to].add(edge.source)
    by_id = {node.id: node for node in plan.nodes}
    for node_id in graphlib.TopologicalSorter(preds).static_order():
        node = by_id[node_id]
        subnet = subnet_of[tools[node.subnet].type]
        info, attempts = tools[subnet], 1 + tools[subnet].fail_first
        cost += info.avg_cost * attempts * route(subnet).top_k
        finish[node.id] = max((finish.get(p, 0.0) for p in preds[node.id]), default=0.0) + info.avg_latency * attempts
    latency = max(finish.values(), default=0.0)
    budget = limits.max_budget_tao or math.inf
    return W_COST * cost / budget + W_LATENCY * latency / limits.max_latency_seconds


async def _family_rows(family: Family, seeds: Sequence[int]) -> list[dict[str, Any]]:
    """One row per tier: each strategy's runs and the oracle's on every seed."""
    tasks = [family.task(family.instance(seed)) for seed in seeds]
    packages = {tier: at_tier(family.package, tier) for tier in TIERS}
    proposals = {
        (tier, strategy): _propose(family, packages[tier], strategy)
        for tier in TIERS
        for strategy in REFERENCE_PLANNERS
    }
    runs = {key: [await _run(proposal, at_tier(task, key[0])) for task in tasks] for key, proposal in proposals.items()}
    oracles = _oracles(family, proposals)
    best = []  # per seed: the best of the oracle's plans and good's own runs at every tier
    for k, task in enumerate(tasks):
        candidates = [await _run(oracle, task) for oracle in oracles] + [runs[(tier, "good")][k] for tier in TIERS]
        best.append(max(candidates, key=lambda run: run["S"]))
    rows = []
    for tier in TIERS:
        row: dict[str, Any] = {
            "task_id": family.task_id,
            "task_type": family.task_type,
            "tier": tier,
            ORACLE: _median(best),
        }
        for strategy in REFERENCE_PLANNERS:
            row[strategy] = _median(runs[(tier, strategy)])
        rows.append(row)
    return rows


def _oracles(family: Family, proposals: dict[tuple[HintTier, str], PlanProposal | None]) -> list[PlanProposal]:
    """The family's own programs (its full-tier steps, and the generator's shorter
    ``program`` where it has one) and each distinct program ``good`` found at any tier,
    on the best subnets for the profile."""
    package = family.package
    found = [proposal for (_, strategy), proposal in proposals.items() if strategy == "good"]
    own = [package] + ([package.model_copy(update={"steps": list(family.program)})] if family.program else [])
    for steps in own:
        try:
            found.append(GoodPlanner(shorter=False).plan(steps))
        except PlanningError:
            pass
    programs = dict[str, WorkflowPlan]()
    for proposal in found:
        if proposal is not None:
            plan = oracle_plan(package, proposal.plan)
            programs.setdefault(plan.model_dump_json(), plan)
    return [
        PlanProposal(plan, sum(n.estimated_cost for n in plan.nodes), 0.0, 0.5, ORACLE) for plan in programs.values()
    ]


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "S": statistics.median(run["S"] for run in runs),
        "solved": sum(run["solved"] for run in runs),
        "runs": len(runs),
    }


def hidden_seeds(seed: int, seeds: int) -> list[int]:
    """``seeds`` consecutive seeds from ``seed`` that are no public example's
    (:func:`tasks.seed.public_seed`: ``0``, or 64-bit with the top bit set)."""
    hidden = (candidate for candidate in itertools.count(seed) if candidate != EXAMPLE_SEED and candidate < 1 << 63)
    return list(itertools.islice(hidden, seeds))


async def run_tiers_bench(
    *,
    seed: int = 1,
    seeds: int = 3,
    drawn: int = 40,
    secret: int = 0,
    concurrency: int = 4,
    families: Sequence[Family] = (),
) -> dict[str, Any]:
    """Every family × tier × strategy on the hidden instances of :func:`hidden_seeds`
    (``families``, else :func:`bench_families`)."""
    chosen = hidden_seeds(seed, seeds)
    families = list(families) or bench_families(drawn, secret)
    per_family = await _bounded([_family_rows(family, chosen) for family in families], concurrency)
    rows = [row for family_rows in per_family for row in family_rows]
    return {
        "seed": seed,
        "seeds": seeds,
        "instances": chosen,
        "drawn": drawn,
        "secret": secret,
        "families": len(families),
        "rows": rows,
        "summary": summarize_tiers(rows),
    }


def summarize_tiers(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per ``tier/type`` (and ``tier/all``): mean S per strategy and the oracle, the headroom,
    the share of good's runs that solved their instance, good's wins over naive, the weights."""
    summary: dict[str, dict[str, Any]] = {}
    for tier in TIERS:
        at = [r for r in rows if r["tier"] == tier]
        groups = {t: [r for r in at if r["task_type"] == t] for t in sorted({r["task_type"] for r in at})}
        groups["all"] = at
        for name, typed in groups.items():
            means = {s: statistics.fmean(r[s]["S"] for r in typed) for s in (*REFERENCE_PLANNERS, ORACLE)}
            weights = network_weights(means["good"], means["naive+retries"])["2_miners"]
            summary[f"{tier}/{name}"] = {
                "tier": tier,
                "type": name,
                "families": len(typed),
                "mean_S": means,
                "headroom": means[ORACLE] - means["good"],
                "solved": sum(r["good"]["solved"] for r in typed) / sum(r["good"]["runs"] for r in typed),
                "good_beats_naive": sum(r["good"]["S"] > r["naive"]["S"] for r in typed),
                "weights": weights,
                "ratio": _ratio(weights["good"], weights["other"]),
            }
    return summary


def _ratio(good: float, other: float) -> float | None:
    """good ÷ other; infinite when only good scores, ``None`` when neither does."""
    if other > 0:
        return good / other
    return math.inf if good > 0 else None


def _ratio_cell(entry: Mapping[str, Any]) -> str:
    """The ratio from the weights themselves (JSON carries no infinity)."""
    ratio = _ratio(entry["weights"]["good"], entry["weights"]["other"])
    return "-" if ratio is None else "inf" if math.isinf(ratio) else f"{ratio:.2f}"


def _mean(strategy: str) -> Any:
    return lambda entry: f"{entry['mean_S'][strategy]:.3f}"


COLUMNS = (
    Column("tier", lambda e: e["tier"], keep=ALWAYS, justify="left"),
    Column(
        "type",
        lambda e: e["type"],
        keep=ALWAYS,
        justify="left",
        short=lambda e: str({"data_transform": "data"}.get(e["type"], e["type"])),
    ),
    Column("good", _mean("good"), keep=ALWAYS),
    Column("naive", _mean("naive"), keep=6),
    Column("+retries", _mean("naive+retries"), keep=ALWAYS),
    Column("oracle", _mean(ORACLE), keep=5),
    Column("headroom", lambda e: f"{e['headroom']:+.3f}", keep=ALWAYS),
    Column("solved", lambda e: f"{e['solved']:.0%}", keep=ALWAYS),
    Column("good>naive", lambda e: f"{e['good_beats_naive']}/{e['families']}", keep=3),
    Column(
        "weights good / +retries",
        lambda e: f"{e['weights']['good']:.3f} / {e['weights']['other']:.3f}",
        keep=4,
        short=lambda e: f"{e['weights']['good']:.2f}/{e['weights']['other']:.2f}",
    ),
    Column("ratio", _ratio_cell, keep=ALWAYS),
)
"""The tiers table, by importance: what the targets read is never dropped."""


def render_tiers_bench(result: dict[str, Any], console: Console) -> None:
    seeds = "seeds " + ", ".join(map(str, result["instances"]))
    title = f"{result['families']} families ({result['drawn']} drawn) per hint tier, mean of median S over {seeds}"
    console.print(fit_table(COLUMNS, list(result["summary"].values()), console.width, title=title))
    for target, misses in tier_targets(result["summary"]):
        verdict = "ok" if not misses else "miss: " + ", ".join(misses)
        console.print(f"target: {target}: {verdict}", highlight=False)


def tier_targets(summary: dict[str, dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """Issue 21's targets, each with the ``tier/type`` entries that miss it."""
    typed = [entry for entry in summary.values() if entry["type"] != "all"]

    def misses(entries: list[dict[str, Any]], holds: Any) -> list[str]:
        return [f"{e['tier']}/{e['type']}" for e in entries if not holds(e)]

    def ratio(entry: dict[str, Any]) -> float:
        found = _ratio(entry["weights"]["good"], entry["weights"]["other"])
        return 0.0 if found is None else found

    goal = [entry for entry in typed if entry["tier"] == "goal"]
    return [
        (
            f"good's weight ≥ {RATIO_TARGET:g} × naive+retries' on every type and tier",
            misses(typed, lambda e: ratio(e) >= RATIO_TARGET),
        ),
        ("naive scores 0 on goal", misses(goal, lambda e: e["mean_S"]["naive"] == 0)),
        (
            f"good solves ≥ {SOLVED_TARGET:.0%} of goal instances of every type",
            misses(goal, lambda e: e["solved"] >= SOLVED_TARGET),
        ),
        ("headroom > 0 on every type and tier", misses(typed, lambda e: e["headroom"] > 0)),
    ]
