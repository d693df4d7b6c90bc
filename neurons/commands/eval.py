"""``dagnet eval PLANNER``: a planner scored offline as a validator scores it, beside
``good`` and ``naive`` (:mod:`neurons.evaluation`), printed in 80 columns or as JSON."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from neurons.commands.common import JsonOpt, WorldOpt, fail, print_json
from protocol.hints import HintTier
from validator.settings import setting_default

_WIDTH = 80
_NUMBERS = ("S", "S_success", "S_cost", "S_latency", "S_reliability", "output_quality")
_HEADS = ("S", "succ", "cost", "lat", "rel", "qual", "good", "naive")
_NODE_LINES = 6


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_planner)


def eval_planner(
    planner: Annotated[
        str,
        typer.Argument(
            metavar="PLANNER",
            help="good | naive | invalid | precompute, an installed dagnet.planners entry point, "
            "or package.module:attr.",
        ),
    ],
    family: Annotated[
        Optional[list[str]],
        typer.Option(
            "--family", metavar="ID", help="Only this task family (repeatable).  [default: none: every family]"
        ),
    ] = None,
    task_type: Annotated[
        Optional[str],
        typer.Option(
            "--type",
            metavar="T",
            help="Only families of this type: agent | code | data_transform | rag.  [default: none: every type]",
        ),
    ] = None,
    seeds: Annotated[int, typer.Option("--seeds", min=1, max=1000, help="Instances per family.")] = 3,
    seed_base: Annotated[
        int,
        typer.Option(
            "--seed-base",
            min=0,
            help="The first seed; instances are seeds BASE .. BASE+N-1 (seed 0 is the "
            "public example, which a validator never draws).",
        ),
    ] = 1,
    config: Annotated[
        Optional[Path],
        typer.Option(
            "--config",
            metavar="FILE",
            help="A miner settings file: its [planner] section (options, timeout_s) applies.  [default: none]",
        ),
    ] = None,
    sets: Annotated[
        Optional[list[str]],
        typer.Option(
            "--set", metavar="KEY=VALUE", help="Override one miner setting, e.g. planner.options.k=3 (repeatable)."
        ),
    ] = None,
    tier: Annotated[
        Optional[HintTier],
        typer.Option(
            "--tier",
            help="Send every package at this hint tier: full | outline | goal (docs/tasks.md).  "
            "[default: none: each instance's tier drawn as a validator draws it, 0.2 full / 0.3 outline / 0.5 goal]",
        ),
    ] = None,
    secret: Annotated[
        int,
        typer.Option(
            "--secret",
            min=0,
            help="The secret a validator draws its families and tiers from (any number: each "
            "gives other families and tiers).",
        ),
    ] = 1,
    tempos: Annotated[
        Optional[list[int]],
        typer.Option(
            "--tempo", min=0, metavar="T", help="Add the families drawn for this tempo (repeatable).  [default: 0]"
        ),
    ] = None,
    drawn: Annotated[
        int,
        typer.Option(
            "--drawn",
            min=0,
            max=64,
            help="Families drawn per tempo, as a validator's drawn_per_tempo (0: the curated families only).",
        ),
    ] = setting_default("drawn_per_tempo"),
    world: str = WorldOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Score a planner on what a validator sends, exactly as a validator would (owned
    execution, the validator's seed and tier draws, synthetic variants, check and scorer),
    beside good and naive: every curated family and those drawn for --secret and --tempo,
    × seeds; print mean S and its parts per family, type, tier and kind, wins against
    good, and the weight share it would earn."""
    from miner.settings import MinerSettings
    from neurons.evaluation import Mix, evaluate_planner, select_families
    from neurons.files import InputError
    from neurons.settings import build_settings
    from planners import PlannerLoadError

    try:  # as `dagnet miner --planner`: the flag wins, the options apply
        settings = build_settings(
            MinerSettings, config_file=config, overrides=sets or (), flags={"planner.name": planner}
        )
        pool = _drawn(secret, tempos or [0], drawn, family or ())
        families = select_families(family or (), task_type, [f for _, f in pool])
    except (InputError, KeyError) as exc:
        fail(str(exc).strip("'\""))
    progress = _progress if sys.stderr.isatty() else None
    try:
        result = evaluate_planner(
            planner,
            options=settings.planner.options,
            families=families,
            seeds=range(seed_base, seed_base + seeds),
            timeout_s=settings.planner.timeout_s,
            progress=progress,
            mix=Mix(tier=tier, secret=secret, world=world),
            drawn={f.task_id: tempo for tempo, f in pool},
        )
    except (PlannerLoadError, ValueError) as exc:
        fail(str(exc))
    if as_json:
        print_json(result)
    else:
        typer.echo("\n".join(render(result)))


def _drawn(secret: int, tempos: list[int], count: int, ids: Sequence[str]) -> list[tuple[int, Any]]:
    """``(tempo, family)`` for every family a validator with ``secret`` draws for
    ``tempos``, checked as it checks them; none when ``ids`` name curated families only."""
    from tasks.drawn import PREFIX

    if count == 0 or (ids and not any(i.startswith(PREFIX) for i in ids)):
        return []
    from tasks import drawn_families
    from validator.reference import reference_solves

    if sys.stderr.isatty():
        sys.stderr.write(f"drawing {count} families for tempo {', '.join(map(str, tempos))} (secret {secret})...\n")
    return [
        (tempo, f)
        for tempo in dict.fromkeys(tempos)
        for f in drawn_families(secret, tempo, count, verify=reference_solves)
    ]


def _progress(done: int, total: int, current: str) -> None:
    width = 24
    filled = width * done // max(total, 1)
    line = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {current}"
    sys.stderr.write("\r" + line[: _WIDTH - 1].ljust(_WIDTH - 1) + ("\n" if done == total else ""))
    sys.stderr.flush()


def _reference(ref: str, name: str) -> str:
    """A reference miner's label on the pay line: ``ref.naive`` when the planner scored is
    ``naive`` itself (the line said "naive 0.333 … naive 0.333")."""
    return f"ref.{ref}" if ref == name else ref


def render(result: dict[str, Any]) -> list[str]:
    """The tables, at most 80 columns wide (a long family id or reason is wrapped, not cut)."""
    name, seeds = result["planner"], result["seeds"]
    span = f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}..{seeds[-1]}"
    lines = [*_wrapped(_intro(result, span), ""), "", _row("family", _HEADS, "wins", first=22)]
    for row in result["families"]:
        lines.append(_group_row(row["task_id"], row, name))
        if row["error"]:
            lines += _wrapped(f"error: {row['error']}", "  ")
    for title, groups in (("type", result["types"]), ("tier", result["tiers"]), ("kind", result["kinds"])):
        lines += ["", _row(title, _HEADS, "wins", first=22)]
        lines += [_group_row(f"{key} ({group['instances']})", group, name) for key, group in groups.items()]
    lines += ["", "what validators pay one miner each (the margin over good, as on chain):"]
    good, naive = (_reference(ref, name) for ref in ("good", "naive"))
    for key, group in [*result["types"].items(), *_but_all(result["tiers"]), *_but_all(result["kinds"])]:
        shares, margin = group["weights"], group["margin"]
        lines.append(
            f"  {key:<15} {name[:16]} {shares['planner']:.3f} {good} {shares['good']:.3f} "
            f"{naive} {shares['naive']:.3f} margin {margin['mean']:+.3f}"
        )
    lines += _problems(result)
    return lines


def _intro(result: dict[str, Any], span: str) -> str:
    drawn = len(result["drawn"])
    families = f"{len(result['families']) - drawn} curated" + (
        f" and {drawn} drawn (secret {result['secret']}, tempo {', '.join(map(str, sorted(set(result['drawn'].values()))))})"
        if drawn
        else ""
    )
    if result["tier"] == "mix":
        tiers = (
            "each at the tier a validator sends it (curated at full; drawn at their tempo's draw: "
            + " / ".join(f"{share:g} {tier}" for tier, share in result["tier_shares"].items())
            + ")"
        )
    else:
        tiers = f"at the {result['tier']} tier"
    intro = (
        f"dagnet eval {result['planner']}: {families} families x {span}, {tiers}, "
        f"{result['synthetic_rate']:.1%} as synthetic variants; scored as a validator scores (owned "
        "execution, the validator's check and scorer); the mean over the instances (their number in "
        "brackets). wins: instances where it scores above good."
    )
    if 0 in result["seeds"]:
        intro += " Seed 0 is the public example: a validator never draws it."
    return intro


def _group_row(label: str, group: dict[str, Any], name: str) -> str:
    mean = group["mean"]
    cells = [mean[name][p] for p in _NUMBERS] + [mean["good"]["S"], mean["naive"]["S"]]
    return _row(label, [f"{v:.3f}" for v in cells], _wins(group["wins"]), first=22)


def _but_all(groups: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(key, group) for key, group in groups.items() if key != "all"]


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
            what = (
                "rejected by the validator's check" if run["findings"] else run["reason"] or f"status {run['status']}"
            )
            lines += _wrapped(f"{row['task_id']} seed {run['seed']}: S {run['score']['S']:.3f}, {what}", "  ")
            found = [*run["findings"], *(f"node {node_id}: {why}" for node_id, why in run["nodes"].items())]
            for finding in found[:_NODE_LINES]:
                lines += _wrapped(finding, "    ")
            if len(found) > _NODE_LINES:
                lines.append(f"    ... and {len(found) - _NODE_LINES} more")
    return ["", f"where {name} lost points:", *lines] if lines else []


def _wrapped(text: str, indent: str) -> list[str]:
    return textwrap.wrap(
        text,
        _WIDTH,
        initial_indent=indent,
        subsequent_indent=indent + "  ",
        break_long_words=True,
        break_on_hyphens=False,
    ) or [indent]
