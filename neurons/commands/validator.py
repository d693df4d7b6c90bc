"""``dagnet validator``: run a validator, or re-score one stored execution (``--replay``).

The process itself (chain, loop, state, ``/health``) is :mod:`neurons.validator`,
imported only when the command runs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from neurons.localrun import SHIPPED_TASKS
from neurons.commands.common import describe, error, fail
from neurons.commands.network import DevKeyOpt, HotkeyOpt, NeuronWalletOpt, WalletPathOpt


def register(app: typer.Typer) -> None:
    app.command("validator")(validator)


def validator(
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
    state: Annotated[Path, typer.Option(help="The validator's SQLite state file.")] = Path("validator.sqlite"),
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
    """Validate: query miners, execute and score their plans, set weights once per tempo."""
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
