"""`dagnet bench tasks`: every v2 family planned by each reference strategy, run on a
hidden instance exactly as a validator runs it, scored, and turned into weights.

Strategies: ``good``; ``naive`` (a chain on the first listed subnets); ``naive+retries``
(the naive chain with one declared retry per node: the strongest plan that does no
planning). Per type it prints the mean S of each, and the weights
``scoring.weights.normalize_weights`` gives the windowed means in a 2-miner network
(good against the other) and a 10-miner one (5 good, 5 of the other).
"""

from __future__ import annotations

import asyncio
import statistics
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks import Family, load_families
from miner.planner import PlanProposal, get_planner
from protocol.documents import PlanDocument
from protocol.plan import ErrorPolicy
from neurons.localrun import run_document
from scoring.weights import normalize_weights

STRATEGIES = ("good", "naive", "naive+retries")
CHAINS = ("naive", "naive+retries")


def propose(family: Family, strategy: str) -> PlanProposal:
    """The strategy's answer to ``family``'s package."""
    if strategy == "naive+retries":
        proposal = get_planner("naive").plan(family.package)
        retries = {node.id: ErrorPolicy(retry_count=1) for node in proposal.plan.nodes}
        plan = proposal.plan.model_copy(update={"error_handling": retries})
        return PlanProposal(plan, proposal.total_estimated_cost, proposal.total_estimated_latency,
                            proposal.confidence, proposal.reasoning + "; one retry per node")
    return get_planner(strategy).plan(family.package)


async def _score_family(family: Family, seed: int) -> dict[str, Any]:
    task = family.task(family.instance(seed))
    row: dict[str, Any] = {"task_id": family.task_id, "task_type": family.task_type}
    for strategy in STRATEGIES:
        proposal = propose(family, strategy)
        document = PlanDocument(proposal.plan, proposal.total_estimated_cost, "synapse")
        report = await run_document(document, task=task)
        score = report["score"]
        row[strategy] = {key: score[key] for key in ("S", "output_quality", "S_cost", "S_latency", "S_reliability")}
        row[strategy] |= {"status": report["status"], "latency_s": report["latency_s"], "cost_tao": report["cost_tao"]}
    return row


async def run_tasks_bench(*, seed: int = 0, concurrency: int = 4) -> dict[str, Any]:
    """Score every family's instance drawn from ``seed`` with every strategy."""
    gate = asyncio.Semaphore(concurrency)

    async def one(family: Family) -> dict[str, Any]:
        async with gate:
            return await _score_family(family, seed)

    rows = await asyncio.gather(*(one(family) for family in load_families()))
    return {"seed": seed, "strategies": list(STRATEGIES), "rows": rows, "summary": summarize(rows)}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean S per type and overall, good's wins over each chain, and the weights."""
    groups = {t: [r for r in rows if r["task_type"] == t] for t in sorted({r["task_type"] for r in rows})}
    groups["all"] = rows
    summary: dict[str, Any] = {}
    for name, typed in groups.items():
        means = {s: statistics.fmean(r[s]["S"] for r in typed) for s in STRATEGIES}
        summary[name] = {
            "families": len(typed),
            "mean_S": means,
            "good_beats": {c: sum(r["good"]["S"] > r[c]["S"] for r in typed) for c in CHAINS},
            "weights": {c: network_weights(means["good"], means[c]) for c in CHAINS},
        }
    return summary


def network_weights(good: float, other: float) -> dict[str, dict[str, float]]:
    """Each miner's weight when ``good`` and ``other`` are windowed mean scores: in a
    2-miner network (one of each) and a 10-miner one (five of each)."""
    two = normalize_weights({0: good, 1: other})
    ten = normalize_weights({uid: good if uid < 5 else other for uid in range(10)})
    return {"2_miners": {"good": two[0], "other": two[1]}, "10_miners": {"good": ten[0], "other": ten[9]}}


def render_tasks_bench(result: dict[str, Any], console: Console) -> None:
    table = Table(title=f"v2 task families, instances of seed {result['seed']}")
    table.add_column("family")
    for strategy in STRATEGIES:
        table.add_column(f"S {strategy}", justify="right")
    for row in result["rows"]:
        table.add_row(row["task_id"], *(f"{row[s]['S']:.3f}" for s in STRATEGIES))
    console.print(table)
    summary = Table(title="per type: mean S, and each miner's weight (good / other)")
    for column in ("type", *(f"S {s}" for s in STRATEGIES), "good wins", "2 miners vs naive", "10 miners vs naive",
                   "2 miners vs naive+retries", "10 miners vs naive+retries"):
        summary.add_column(column, justify="right")
    for name, entry in result["summary"].items():
        wins = " / ".join(f"{entry['good_beats'][c]}" for c in CHAINS) + f" of {entry['families']}"
        cells = [name, *(f"{entry['mean_S'][s]:.3f}" for s in STRATEGIES), wins]
        for chain in CHAINS:
            for size in ("2_miners", "10_miners"):
                w = entry["weights"][chain][size]
                cells.append(f"{w['good']:.3f} / {w['other']:.3f}")
        summary.add_row(*cells)
    console.print(summary)
