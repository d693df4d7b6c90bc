"""``dagnet validator``: run a validator, or re-score one stored execution (``--replay``);
``dagnet validator tasks``: each task's lifecycle in a state file, and ``--reset``.

``validator`` is a group whose callback is the validator itself, so ``dagnet
validator --wallet-name W ...`` runs it and ``dagnet validator tasks ...`` does not.
The process (chain, loop, state, ``/health``) is :mod:`neurons.validator`, imported
only when the validator runs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from neurons.localrun import SHIPPED_TASKS
from neurons.commands.common import JsonOpt, describe, error, fail, print_json
from neurons.commands.network import DevKeyOpt, HotkeyOpt, NeuronWalletOpt, WalletPathOpt


validator_app = typer.Typer(invoke_without_command=True)  # the help is the callback's docstring

StateOpt = Annotated[Path, typer.Option(help="The validator's SQLite state file.")]


def register(app: typer.Typer) -> None:
    app.add_typer(validator_app, name="validator")


@validator_app.callback()
def validator(
    ctx: typer.Context,
    dev_key: DevKeyOpt = None,
    wallet_name: NeuronWalletOpt = None,
    wallet_hotkey: HotkeyOpt = "default",
    wallet_path: WalletPathOpt = None,
    network: Annotated[
        Optional[str],
        typer.Option(
            "--network", "--subtensor.network", help="finney | test | local | ws://URL | embedded[:PATH].  [default: none]"
        ),
    ] = None,
    chain_endpoint: Annotated[
        Optional[str], typer.Option("--chain-endpoint", "--subtensor.chain_endpoint", help="Overrides --network.  [default: none]")
    ] = None,
    netuid: Annotated[int, typer.Option(help="Subnet uid.")] = 1,
    state: StateOpt = Path("validator.sqlite"),
    tasks: Annotated[
        Path, typer.Option(help="v2 (the shipped task families, a hidden instance drawn each step) or a task-set file.")
    ] = SHIPPED_TASKS,
    host: Annotated[str, typer.Option(help="Address of /health and /metrics.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port of /health and /metrics; 0 picks a free one.")] = 9100,
    sample_size: Annotated[int, typer.Option(help="Miners queried per step.")] = 256,
    query_timeout: Annotated[float, typer.Option(help="Seconds a miner has to answer (< one block).")] = 8.0,
    exec_concurrency: Annotated[int, typer.Option(help="Plans executed at once.")] = 16,
    max_frames: Annotated[int, typer.Option(help="Frames one generator node may emit.")] = 1000,
    max_frame_instances: Annotated[int, typer.Option(help="Frame instances one plan's run may hold.")] = 10_000,
    providers: Annotated[
        Optional[Path],
        typer.Option(help="JSON [{uid, hotkey, url}]: tool providers of every subnet (local networks).  [default: none: the partner subnets' metagraphs]"),
    ] = None,
    poll: Annotated[float, typer.Option(help="Seconds between looks at the chain head.")] = 1.0,
    replay_id: Annotated[
        Optional[int],
        typer.Option("--replay", metavar="RECORD", help="Re-score stored execution RECORD and exit (0 identical, 1 not).  [default: none: run]"),
    ] = None,
    log_level: Annotated[str, typer.Option(help="debug | info | warning | error.")] = "info",
) -> None:
    """Validate: query miners, execute and score their plans, set weights once per tempo.

    Run with a key (--dev-key or --wallet.name) and the options below; `dagnet validator
    tasks` shows the task lifecycle kept in a state file instead.
    """
    if ctx.invoked_subcommand is not None:
        return
    if replay_id is not None:
        _replay(state, tasks, replay_id)
        return
    from neurons.validator import ValidatorProcessConfig, run_validator

    try:
        config = ValidatorProcessConfig(
            dev_key=dev_key, wallet_name=wallet_name, wallet_hotkey=wallet_hotkey, wallet_path=wallet_path,
            network=network, chain_endpoint=chain_endpoint, netuid=netuid, state=state, tasks=tasks, host=host,
            port=port, sample_size=sample_size, query_timeout_s=query_timeout, exec_concurrency=exec_concurrency,
            providers=providers, poll_s=poll, log_level=log_level, max_frames=max_frames,
            max_frame_instances=max_frame_instances,
        )
        config.wallet()  # a key that cannot be loaded is an input error, found before anything starts
    except ValueError as exc:
        fail(describe(exc))
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(run_validator(config))
    except (KeyError, OSError, ValueError) as exc:
        error(str(exc))
        raise typer.Exit(1) from None


def _replay(state: Path, tasks: Path, record_id: int) -> None:
    from neurons.validator import replay_record

    if not state.exists():
        fail(f"no state file {state}")
    try:
        result = replay_record(state, tasks, record_id)
    except (LookupError, OSError, ValueError) as exc:
        fail(str(exc).strip("'"))
    sys.stdout.write(json.dumps(result, indent=2, sort_keys=True) + "\n")
    if not result["identical"]:
        raise typer.Exit(1)


@validator_app.command("tasks")
def tasks(
    state: StateOpt = Path("validator.sqlite"),
    reset: Annotated[bool, typer.Option("--reset", help="Make every task active again, no failures counted.")] = False,
    as_json: bool = JsonOpt,
) -> None:
    """List each task's lifecycle state; --reset makes every task active again.

    A task is active, or set aside (since and until which block, and why); the
    failures column counts the steps in a row its reference plan failed.
    """
    from validator.state import ValidatorState

    if not state.exists():
        fail(f"no state file {state}")
    store = ValidatorState(state)
    try:
        if reset:
            store.reset_tasks()
        rows = [_lifecycle_row(task) for task in store.task_lifecycles().values()]
    finally:
        store.close()
    if as_json:
        print_json(rows)
        return
    for line in _lifecycle_lines(rows):
        typer.echo(line)


def _lifecycle_row(task: Any) -> dict[str, Any]:
    return {
        "task_id": task.task_id, "state": task.state, "since_block": task.since_block,
        "until_block": task.until_block, "reason": task.reason, "reference_failures": task.reference_failures,
    }


_COLUMNS = (
    ("task", "task_id"), ("state", "state"), ("since", "since_block"), ("until", "until_block"),
    ("ref. failures", "reference_failures"), ("reason", "reason"),
)


def _lifecycle_lines(rows: list[dict[str, Any]]) -> list[str]:
    """A header and one aligned line per task (``-`` for what is not set); the reason last, whole."""
    if not rows:
        return ["no task in the state file yet"]
    table = [[header for header, _ in _COLUMNS]]
    table += [["-" if row[key] is None else str(row[key]) for _, key in _COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(_COLUMNS) - 1)]
    return [
        "  ".join([*(cell.ljust(width) for cell, width in zip(line, widths)), line[-1]]).rstrip() for line in table
    ]
