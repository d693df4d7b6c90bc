"""`dagnet bench tasks`: every v2 family planned by each reference strategy, run on
hidden instances exactly as a validator runs them, scored, and turned into weights.

Strategies: ``good``; ``naive`` (a chain on the first listed subnets); ``naive+retries``
(the naive chain with one declared retry per node: the strongest plan that does no
planning). Each family runs on the instances of ``seeds`` consecutive seeds and keeps
each strategy's median S, so one slow run on a busy machine does not decide a family.
Per type it prints the mean of those medians, and the weights
``scoring.weights.normalize_weights`` gives them in a 2-miner network (good against
the other) and a 10-miner one (5 good, 5 of the other).

It also runs two copies of ``good`` side by side over a window of tasks (family ``i``
mod 40 on seed ``seed + i``), one task at a time as a validator's step runs its miners'
plans together: their scores differ only by timing noise, and their weights should stay
within 10 % of each other.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from rich.console import Console
from rich.table import Table

from engine.owned import owned_report
from planners import PlanProposal, load_planner
from planners.naive import naive_with_retries
from protocol.documents import PlanDocument
from protocol.task import Task
from protocol.validation import check_plan_for
from scoring.weights import normalize_weights
from subnets.owned import owned_runner
from tasks import Family, load_families

REFERENCE_PLANNERS = ("good", "naive", "naive+retries")
CHAINS = ("naive", "naive+retries")
COPIES_WITHIN = 1.10
"""Two copies of one planner must get weights within this ratio of each other."""

T = TypeVar("T")


def propose(family: Family, strategy: str) -> PlanProposal:
    """The strategy's answer to ``family``'s package."""
    if strategy == "naive+retries":
        return naive_with_retries(family.package)
    proposal = load_planner(strategy).plan(family.package)
    if not isinstance(proposal, PlanProposal):  # the reference planners answer one, synchronously
        raise TypeError(f"planner {strategy!r} answered {type(proposal).__name__}, not a PlanProposal")
    return proposal


async def dry_run(document: PlanDocument, task: Task) -> dict[str, Any]:
    """The report ``dagnet run PLAN --task`` prints for ``document`` on ``task``: owned
    execution's (:func:`engine.owned.owned_report`), in a thread."""
    check = check_plan_for(document.plan, task)
    return await asyncio.to_thread(
        owned_report, document.plan, check, task, owned_runner(task), total_estimated_cost=document.total_estimated_cost
    )


async def run_strategy(family: Family, strategy: str, seed: int) -> dict[str, Any]:
    """The run report of ``strategy``'s plan on ``family``'s instance of ``seed``."""
    proposal = propose(family, strategy)
    document = PlanDocument(proposal.plan, proposal.total_estimated_cost, "synapse")
    return await dry_run(document, family.task(family.instance(seed)))


async def _score_family(family: Family, seeds: list[int]) -> dict[str, Any]:
    row: dict[str, Any] = {"task_id": family.task_id, "task_type": family.task_type}
    for strategy in REFERENCE_PLANNERS:
        reports = [await run_strategy(family, strategy, seed) for seed in seeds]
        runs = [
            {key: report["score"][key] for key in ("S", "output_quality", "S_cost", "S_latency", "S_reliability")}
            | {"status": report["status"], "latency_s": report["latency_s"], "cost_tao": report["cost_tao"]}
            for report in reports
        ]
        row[strategy] = {"S": statistics.median(run["S"] for run in runs), "runs": runs}
    return row


async def _bounded(coroutines: list[Awaitable[T]], width: int) -> list[T]:
    gate = asyncio.Semaphore(width)

    async def one(coroutine: Awaitable[T]) -> T:
        async with gate:
            return await coroutine

    return await asyncio.gather(*(one(c) for c in coroutines))


async def run_tasks_bench(*, seed: int = 0, seeds: int = 3, window: int = 100, concurrency: int = 4) -> dict[str, Any]:
    """Score every family on the instances of seeds ``seed .. seed + seeds - 1`` with every
    strategy, then two copies of ``good`` over ``window`` tasks (0 skips them)."""
    drawn = list(range(seed, seed + seeds))
    rows = await _bounded([_score_family(family, drawn) for family in load_families()], concurrency)
    result = {
        "seed": seed,
        "seeds": seeds,
        "strategies": list(REFERENCE_PLANNERS),
        "rows": rows,
        "summary": summarize(rows),
    }
    if window > 0:
        result["copies"] = await run_copies(window=window, seed=seed)
    return result


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean of the per-family medians per type and overall, good's wins over each chain,
    and the weights."""
    groups = {t: [r for r in rows if r["task_type"] == t] for t in sorted({r["task_type"] for r in rows})}
    groups["all"] = rows
    summary: dict[str, Any] = {}
    for name, typed in groups.items():
        means = {s: statistics.fmean(r[s]["S"] for r in typed) for s in REFERENCE_PLANNERS}
        summary[name] = {
            "families": len(typed),
            "mean_S": means,
            "good_beats": {c: sum(r["good"]["S"] > r[c]["S"] for r in typed) for c in CHAINS},
            "weights": {c: network_weights(means["good"], means[c]) for c in CHAINS},
        }
    return summary


def network_weights(good: float, other: float) -> dict[str, dict[str, float]]:
    """Each miner's weight when ``good`` and ``other`` are windowed mean scores: in a
    2-miner network (one of each) and a 10-miner one (five of each); 0 for a miner the
    weights leave out (every score 0)."""
    two = normalize_weights({0: good, 1: other})
    ten = normalize_weights({uid: good if uid < 5 else other for uid in range(10)})
    return {
        "2_miners": {"good": two.get(0, 0.0), "other": two.get(1, 0.0)},
        "10_miners": {"good": ten.get(0, 0.0), "other": ten.get(9, 0.0)},
    }


async def run_copies(
    *,
    window: int,
    seed: int = 0,
    concurrency: int = 1,
    strategy: str = "good",
    families: Sequence[Family] = (),
) -> dict[str, Any]:
    """Two copies of ``strategy`` answer the same ``window`` tasks (family ``i`` mod the
    family count, instance of seed ``seed + i``; every v2 family unless ``families``),
    each task's two runs side by side as a validator runs the miners of one step, and
    ``concurrency`` tasks at a time. Their windowed means and the weights
    ``normalize_weights`` gives them; ``ratio`` is the larger weight over the smaller."""
    families = families or load_families()

    async def both(i: int) -> tuple[float, float]:
        family = families[i % len(families)]
        first, second = await asyncio.gather(*(run_strategy(family, strategy, seed + i) for _ in range(2)))
        pair = first["score"]["S"], second["score"]["S"]
        return pair if i % 2 == 0 else pair[::-1]  # each copy starts first on every other task

    pairs = await _bounded([both(i) for i in range(window)], concurrency)
    means = [statistics.fmean(pair[copy] for pair in pairs) for copy in (0, 1)]
    weights = normalize_weights(dict(enumerate(means)))
    shares = [weights.get(copy, 0.0) for copy in (0, 1)]
    ratio = max(shares) / min(shares) if min(shares) > 0 else float("inf")
    return {
        "strategy": strategy,
        "window": window,
        "mean_S": means,
        "weights": shares,
        "ratio": ratio,
        "within_10_percent": ratio <= COPIES_WITHIN,
    }


def render_tasks_bench(result: dict[str, Any], console: Console) -> None:
    seeds = (
        f"seed {result['seed']}"
        if result["seeds"] == 1
        else f"seeds {result['seed']}..{result['seed'] + result['seeds'] - 1}"
    )
    table = Table(title=f"v2 task families, median S over the instances of {seeds}")
    table.add_column("family")
    for strategy in REFERENCE_PLANNERS:
        table.add_column(strategy, justify="right")
    for row in result["rows"]:
        table.add_row(row["task_id"], *(f"{row[s]['S']:.3f}" for s in REFERENCE_PLANNERS))
    console.print(table)
    means = Table(title="per type: mean S, and the families good beats each chain on")
    means.add_column("type", justify="right", no_wrap=True)
    for column in (*REFERENCE_PLANNERS, *(f"good > {c}" for c in CHAINS)):
        means.add_column(column, justify="right")
    weights = Table(title="per type: weight of one good / one other miner (2 miners; 5 + 5), ratio")
    for column in ("type", "other", "2 miners", "5 + 5", "ratio"):
        weights.add_column(column, justify="right", no_wrap=True)
    for name, entry in result["summary"].items():
        wins = [f"{entry['good_beats'][c]} of {entry['families']}" for c in CHAINS]
        means.add_row(name, *(f"{entry['mean_S'][s]:.3f}" for s in REFERENCE_PLANNERS), *wins)
        for chain in CHAINS:
            two, ten = (entry["weights"][chain][n] for n in ("2_miners", "10_miners"))
            ratio = ten["good"] / ten["other"] if ten["other"] > 0 else float("inf")
            cells = (f"{w['good']:.3f} / {w['other']:.3f}" for w in (two, ten))
            weights.add_row(name if chain == CHAINS[0] else "", chain, *cells, f"{ratio:.2f}")
    console.print(means)
    console.print(weights)
    copies = result.get("copies")
    if copies:
        verdict = "within" if copies["within_10_percent"] else "NOT within"
        console.print(
            f"two copies of {copies['strategy']} over {copies['window']} tasks: mean S "
            f"{copies['mean_S'][0]:.4f} and {copies['mean_S'][1]:.4f}, weights {copies['weights'][0]:.4f} and "
            f"{copies['weights'][1]:.4f} (ratio {copies['ratio']:.4f}, {verdict} 10 %)"
        )
