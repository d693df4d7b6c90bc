"""``dagnet bench executor | network | tasks | world | margin | chain``: benchmarks that print ratios."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console

from bench.progress import Steps
from neurons.commands.common import JsonOpt, print_json
from scoring.margin import K_SE, WORLDS

bench_app = typer.Typer(help="Benchmarks that print ratios measured in one run.", no_args_is_help=True)

PIPED_WIDTH = 200
"""The width tables are fitted to when the output is not a terminal and ``COLUMNS`` is
unset: a file gets every column (``COLUMNS=80`` fits them to 80 instead)."""


def output() -> Console:
    """Where a bench's tables go: the terminal's width, ``COLUMNS``, or :data:`PIPED_WIDTH` when piped."""
    if sys.stdout.isatty() or "COLUMNS" in os.environ:
        return Console()
    return Console(width=PIPED_WIDTH)


@contextmanager
def progress() -> Iterator[Steps]:
    """A progress bar on stderr while the bench runs, when stderr is a terminal; nothing
    when it is not (a pipe, a file, CI), so piped output holds only the result."""
    err = Console(stderr=True)
    if not err.is_terminal:
        yield Steps()
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as bar:
        tasks: dict[str, object] = {}

        def report(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done)  # type: ignore[arg-type]

        yield Steps(report)


def register(app: typer.Typer) -> None:
    app.add_typer(bench_app, name="bench")


@bench_app.command("executor")
def bench_executor(
    as_json: bool = JsonOpt,
    repeats: int = typer.Option(3, "--repeats", min=1, help="Runs per measurement; medians are reported."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random DAGs."),
) -> None:
    """Makespan ÷ critical path on random DAGs (vs a tier-barrier schedule) and scheduling throughput."""
    from bench.executor import render_executor_bench, run_executor_bench

    result = run_executor_bench(seed=seed, repeats=repeats)
    print_json(result) if as_json else render_executor_bench(result, output())


@bench_app.command("network")
def bench_network(
    as_json: bool = JsonOpt,
    miners: int = typer.Option(256, "--miners", min=1, help="Miners in the validation step (256: the largest subnet)."),
) -> None:
    """Signed request throughput of one miner process, and one validation step against 256 miners."""
    from bench.network import render_network_bench, run_network_bench

    result = run_network_bench(miners=miners)
    print_json(result) if as_json else render_network_bench(result, output())


@bench_app.command("tasks")
def bench_tasks(
    seed: int = typer.Option(
        0,
        "--seed",
        min=0,
        help="The first seed instances are drawn from (with --tiers, public examples' seeds are skipped).",
    ),
    seeds: int = typer.Option(3, "--seeds", min=1, help="Instances per family (consecutive seeds); medians are kept."),
    window: int = typer.Option(100, "--window", min=0, help="Tasks two copies of good answer side by side; 0 skips."),
    as_json: bool = JsonOpt,
    concurrency: int = typer.Option(4, "--concurrency", min=1, help="Families run at once."),
    tiers: bool = typer.Option(
        False,
        "--tiers",
        help="Per hint tier and type: good, naive, naive+retries, the "
        "oracle and the headroom, over the curated and --drawn drawn families.",
    ),
    drawn: int = typer.Option(40, "--drawn", min=0, help="With --tiers: families drawn from the grammar."),
    secret: int = typer.Option(0, "--secret", min=0, help="With --tiers: the secret the drawn families come from."),
) -> None:
    """Good vs naive vs naive-with-retries on every v2 task family, the weights each gets,
    and how close two copies of good come over a window of tasks; with ``--tiers``, the
    same per hint tier, with the oracle and the headroom above good."""
    if tiers:
        from bench.tiers import render_tiers_bench, run_tiers_bench

        result = asyncio.run(
            run_tiers_bench(seed=seed, seeds=seeds, drawn=drawn, secret=secret, concurrency=concurrency)
        )
        print_json(result) if as_json else render_tiers_bench(result, output())
        return
    from bench.tasks import render_tasks_bench, run_tasks_bench

    result = asyncio.run(run_tasks_bench(seed=seed, seeds=seeds, window=window, concurrency=concurrency))
    print_json(result) if as_json else render_tasks_bench(result, output())


@bench_app.command("world")
def bench_world(
    tempos: int = typer.Option(10, "--tempos", min=1, help="Tempos of the hidden world played, from tempo 0."),
    seeds: int = typer.Option(1, "--seeds", min=1, help="Hidden instances per family and tempo; medians are kept."),
    final_seeds: int = typer.Option(
        5,
        "--final-seeds",
        min=1,
        help="Hidden instances per family in the last tempo (the learner's gain there is their mean).",
    ),
    drawn: int = typer.Option(
        12, "--drawn", min=0, help="Families drawn from the grammar (secret 0), besides the curated 40."
    ),
    secrets: int = typer.Option(3, "--secrets", min=1, help="Worlds played: those of N secrets from --first-secret."),
    first_secret: int = typer.Option(0, "--first-secret", min=0, help="The first secret played."),
    learner: str = typer.Option(
        "learner",
        "--learner",
        help="The learner planner: a name load_planner knows, or "
        "package.module:attr; 'n/a' in the table when it does not load.",
    ),
    as_json: bool = JsonOpt,
) -> None:
    """The validator's reference (good on the forecast from the published worlds), good,
    good+10, naive+retries, good on the last published world, the oracle that knows the
    world and a learner fed its own feedback, over tempos of the hidden world: mean S over
    the reference per type, headroom, good ÷ naive+retries."""
    from bench.world import render_world_bench, run_world_bench

    with progress() as steps:
        result = run_world_bench(
            tempos=tempos,
            seeds=seeds,
            final_seeds=final_seeds,
            drawn=drawn,
            secrets=secrets,
            first_secret=first_secret,
            learner=learner,
            steps=steps,
        )
    print_json(result) if as_json else render_world_bench(result, output())


@bench_app.command("chain")
def bench_chain(
    as_json: bool = JsonOpt,
    repeats: int = typer.Option(21, "--repeats", min=1, help="Epochs timed; the median is reported."),
) -> None:
    """The epoch's time for 256 uids × 64 validators, and a metagraph read on the embedded chain."""
    from bench.chain import render_chain_bench, run_chain_bench

    result = run_chain_bench(repeats=repeats)
    print_json(result) if as_json else render_chain_bench(result, output())


@bench_app.command("margin")
def bench_margin(
    validators: int = typer.Option(
        3,
        "--validators",
        min=1,
        help="Validators (secrets FIRST .. FIRST+N-1), each in its own hidden world, scoring the same miners.",
    ),
    first_secret: int = typer.Option(
        0, "--first-secret", min=0, help="The first validator's secret: pick secrets nobody developed on."
    ),
    tempos: int = typer.Option(
        24,
        "--tempos",
        min=1,
        help="Tempos each validator plays, from tempo 0 (24 fill a validator's window of worlds).",
    ),
    per_tempo: int = typer.Option(
        52,
        "--per-tempo",
        min=1,
        help=(
            "Families played each tempo, a different draw of them each tempo (at least their count, the "
            "default: all of them; 13 is a quarter of the time, and of what a tempo teaches)."
        ),
    ),
    seeds: int = typer.Option(1, "--seeds", min=1, help="Hidden instances per family and tempo."),
    drawn: int = typer.Option(
        12, "--drawn", min=0, help="Families drawn from the grammar (secret 0), besides the curated 40."
    ),
    worlds: int = typer.Option(
        WORLDS,
        "--worlds",
        min=1,
        help="The tempos each validator's weights are set from (its last ones; validators: the default).",
    ),
    k_se: float = typer.Option(
        K_SE,
        "--k-se",
        min=0.0,
        help="The standard errors a window's margin must clear to be paid as a beater (validators: the default).",
    ),
    learner: str = typer.Option(
        "learner",
        "--learner",
        help="The learner planner: a name load_planner knows, or "
        "package.module:attr; its networks are left out when it does not load.",
    ),
    draws: int | None = typer.Option(
        None,
        "--draws",
        min=1,
        help="Draws of each tempo's world an instance's S is the mean over "
        "(default: the most a validator makes, validator.draws.MOST_DRAWS; 1: one run, as before draws).",
    ),
    as_json: bool = JsonOpt,
) -> None:
    """Shares of the emission when miners are paid for their margin over the validator's
    reference, in the attack networks of issue 35 (retries, hotkeys, copies, renamed
    variants) and beside real better planners; and whether validators with different secrets agree."""
    from bench.margin import render_margin_bench, run_margin_bench

    with progress() as steps:
        result = run_margin_bench(
            validators=validators,
            first_secret=first_secret,
            tempos=tempos,
            per_tempo=per_tempo,
            seeds=seeds,
            drawn=drawn,
            worlds=worlds,
            k_se=k_se,
            learner=learner,
            steps=steps,
            draws=draws,
        )
    print_json(result) if as_json else render_margin_bench(result, output())
