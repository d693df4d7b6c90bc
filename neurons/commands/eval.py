"""``dagnet eval PLANNER``: a planner scored offline as a validator scores it, beside
``good`` and ``naive`` (:mod:`neurons.evaluation`), printed in 80 columns or as JSON."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from neurons.commands.common import JsonOpt, TierOpt, fail, print_json
from protocol.hints import HintTier

_WIDTH = 80
_NUMBERS = ("S", "S_success", "S_cost", "S_latency", "S_reliability", "output_quality")
_HEADS = ("S", "succ", "cost", "lat", "rel", "qual", "good", "naive")
_NODE_LINES = 6


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_planner)


def eval_planner(
    planner: Annotated[str, typer.Argument(
        metavar="PLANNER", help="good | naive | invalid | precompute, an installed dagnet.planners entry point, "
        "or package.module:attr.")],
    family: Annotated[Optional[list[str]], typer.Option(
        "--family", metavar="ID", help="Only this task family (repeatable).  [default: none: every family]")] = None,
    task_type: Annotated[Optional[str], typer.Option(
        "--type", metavar="T", help="Only families of this type: agent | code | data_transform | rag.  "
        "[default: none: every type]")] = None,
    seeds: Annotated[int, typer.Option("--seeds", min=1, max=1000, help="Instances per family.")] = 3,
    seed_base: Annotated[int, typer.Option(
        "--seed-base", min=0, help="The first seed; instances are seeds BASE .. BASE+N-1 (seed 0 is the "
        "public example, which a validator never draws).")] = 1,
    config: Annotated[Optional[Path], typer.Option(
        "--config", metavar="FILE", help="A miner settings file: its [planner] section (options, timeout_s) "
        "applies.  [default: none]")] = None,
    sets: Annotated[Optional[list[str]], typer.Option(
        "--set", metavar="KEY=VALUE", help="Override one miner setting, e.g. planner.options.k=3 (repeatable).")] = None,
    tier: HintTier = TierOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Score a planner on every family × seeds exactly as a validator would (owned execution,
    the validator's seed draw, check and scorer), beside good and naive, every package sent
    at --tier; print mean S and its parts per family and type, wins against good, and the
    weight share it would earn."""
    from miner.config import MinerSettings
    from miner.planner import PlannerLoadError
    from neurons.evaluation import evaluate_planner, select_families
    from neurons.files import InputError
    from neurons.settings import build_settings

    try:
        settings = build_settings(MinerSettings, config_file=config, overrides=sets or ())
        families = select_families(family or (), task_type)
    except (InputError, KeyError) as exc:
        fail(str(exc).strip("'\""))
    options = settings.planner.options if settings.planner.name == planner else {}
    progress = _progress if sys.stderr.isatty() else None
    try:
        result = evaluate_planner(
            planner, options=options, families=families, seeds=range(seed_base, seed_base + seeds),
            timeout_s=settings.planner.timeout_s, progress=progress, tier=tier,
        )
    except PlannerLoadError as exc:
        fail(str(exc))
    if as_json:
        print_json(result)
    else:
        typer.echo("\n".join(render(result)))


def _progress(done: int, total: int, current: str) -> None:
    width = 24
    filled = width * done // max(total, 1)
    line = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {current}"
    sys.stderr.write("\r" + line[: _WIDTH - 1].ljust(_WIDTH - 1) + ("\n" if done == total else ""))
    sys.stderr.flush()


def render(result: dict[str, Any]) -> list[str]:
    """The tables, at most 80 columns wide (a long family id or reason is wrapped, not cut)."""
    name, seeds = result["planner"], result["seeds"]
    span = f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}..{seeds[-1]}"
    intro = (f"dagnet eval {name}: {len(result['families'])} families x {span} at the {result['tier']} tier, "
             "scored as a validator scores (owned execution, the validator's check and scorer); the mean over "
             "the seeds. wins: instances where it scores above good.")
    if 0 in seeds:
        intro += " Seed 0 is the public example: a validator never draws it."
    lines = [*_wrapped(intro, ""), "", _row("family", _HEADS, "wins", first=22)]
    for row in result["families"]:
        mean = row["mean"]
        cells = [mean[name][p] for p in _NUMBERS] + [mean["good"]["S"], mean["naive"]["S"]]
        lines.append(_row(row["task_id"], [f"{v:.3f}" for v in cells], _wins(row["wins"]), first=22))
        if row["error"]:
            lines += _wrapped(f"error: {row['error']}", "  ")
    lines += ["", _row("type", _HEADS, "wins", first=22)]
    for kind, group in result["types"].items():
        mean = group["mean"]
        cells = [mean[name][p] for p in _NUMBERS] + [mean["good"]["S"], mean["naive"]["S"]]
        lines.append(_row(kind, [f"{v:.3f}" for v in cells], _wins(group["wins"]), first=22))
    lines += ["", "weight share in a network of one miner each (the validator's softmax, T 0.06):"]
    for kind, group in result["types"].items():
        shares = group["weights"]
        lines.append(f"  {kind:<16} {name[:20]} {shares['planner']:.3f}  good {shares['good']:.3f}  "
                     f"naive {shares['naive']:.3f}")
    lines += _problems(result)
    return lines


def _row(first_cell: str, cells: Any, last: str, *, first: int) -> str:
    head = first_cell if len(first_cell) <= first else first_cell[: first - 1] + "…"
    return f"{head:<{first}}" + "".join(f"{c:>6}" for c in cells) + f"{last:>7}"


def _wins(wins: dict[str, int]) -> str:
    return f"{wins['above']}/{wins['of']}"


def _problems(result: dict[str, Any]) -> list[str]:
    """Every run of the planner that scored 0 or left nodes unfinished, and why, node by node."""
    name = result["planner"]
    lines: list[str] = []
    for row in result["families"]:
        for run in row["runs"][name]:
            if not run["reason"] and not run["nodes"] and run["score"]["S"] > 0:  # nothing lost but time and tao
                continue
            what = "rejected by the validator's check" if run["findings"] else run["reason"] or f"status {run['status']}"
            lines += _wrapped(f"{row['task_id']} seed {run['seed']}: S {run['score']['S']:.3f}, {what}", "  ")
            found = [*run["findings"], *(f"node {node_id}: {why}" for node_id, why in run["nodes"].items())]
            for finding in found[:_NODE_LINES]:
                lines += _wrapped(finding, "    ")
            if len(found) > _NODE_LINES:
                lines.append(f"    ... and {len(found) - _NODE_LINES} more")
    return ["", f"where {name} lost points:", *lines] if lines else []


def _wrapped(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, _WIDTH, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_long_words=True, break_on_hyphens=False) or [indent]
