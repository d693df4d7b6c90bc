"""``dagnet localnet``: the subnet on this machine, with a live leaderboard.

The orchestration is :mod:`neurons.localnet`, imported only when the command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console

from neurons.commands.common import JsonOpt, error, fail, print_json

DEFAULT_TEMPOS = 4


def register(app: typer.Typer) -> None:
    app.command("localnet")(localnet)


def localnet(
    miners: Optional[int] = typer.Option(
        None,
        "--miners",
        min=1,
        help="Miners; strategies cycle good, naive, invalid, precompute, learner.  [default: 5, one of each]",
    ),
    planners: Optional[list[str]] = typer.Option(
        None,
        "--planner",
        metavar="NAME",
        help="Also serve this planner, one miner beside the others (repeatable): "
        "named as for `dagnet miner --planner` (a built-in, an installed entry point, package.module:attr).  "
        "[default: none]",
    ),
    tempos: Optional[int] = typer.Option(None, "--tempos", min=1, help="Run this many epochs.  [default: 4]"),
    duration: Optional[float] = typer.Option(
        None, "--duration", min=1, help="Run this many seconds instead of --tempos."
    ),
    block_time: float = typer.Option(1.0, "--block-time", min=0.1, help="Seconds per block."),
    tempo: int = typer.Option(20, "--tempo", min=2, help="Blocks per epoch."),
    run_dir: Optional[Path] = typer.Option(
        None,
        "--dir",
        help="New or empty folder for the chain, state and every process's log.  "
        "[default: ~/.cache/dagnet/localnet-<UTC time> ($XDG_CACHE_HOME/dagnet/...), printed at start and end]",
    ),
    keep_runs: Optional[int] = typer.Option(
        None,
        "--keep-runs",
        min=1,
        help="Without --dir: run folders kept in the default location, this one included; "
        "older ones are removed (never one whose chain runs).  [default: 10]",
    ),
    as_json: bool = JsonOpt,
) -> None:
    """The subnet on this machine: embedded chain, validator and miners, with a live leaderboard."""
    from neurons.localnet import LocalnetOptions, localnet_main

    if tempos is not None and duration is not None:
        fail("give --tempos or --duration, not both")
    if keep_runs is not None and run_dir is not None:
        fail("--keep-runs prunes the default folder's runs: with --dir it would do nothing")
    if run_dir is not None and run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir())):
        fail(f"--dir {run_dir}: not a new or empty folder (a run starts its own chain there)")
    _check_planners(planners or [])
    count: dict[str, Any] = {} if miners is None else {"miners": miners}
    kept: dict[str, Any] = {} if keep_runs is None else {"keep_runs": keep_runs}
    options = LocalnetOptions(
        **count,
        planners=tuple(planners or ()),
        tempos=DEFAULT_TEMPOS if tempos is None and duration is None else tempos,
        duration_s=duration,
        block_time_s=block_time,
        tempo=tempo,
        run_dir=run_dir,
        **kept,
    )
    try:
        reached = localnet_main(options, live=not as_json, console=Console())
    except RuntimeError as exc:
        error(str(exc))
        raise typer.Exit(code=1) from None
    if as_json:
        print_json(reached.summary())


def _check_planners(names: list[str]) -> None:
    """Load each planner once here, so one that cannot be is one `error:` line before any process starts."""
    from planners import PlannerLoadError, load_planner

    for name in names:
        try:
            load_planner(name)
        except PlannerLoadError as exc:
            fail(str(exc))
