"""``dagnet miner``: run a miner.

The command line carries what an operator sets on every start (the key, where to
listen, the subnet, the planner, the metagraph, workers); every other setting of
:class:`miner.settings.MinerSettings` comes from ``--config FILE`` and ``--set
KEY=VALUE`` (:mod:`neurons.settings`). The web server is imported only when the
miner starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from miner.settings import MinerSettings
from neurons.commands.common import configure_logging, describe, fail
from neurons.commands.network import (
    NO_METAGRAPH,
    DevKeyOpt,
    EndpointOpt,
    HotkeyOpt,
    MinerNetworkOpt,
    NeuronWalletOpt,
    WalletPathOpt,
)
from neurons.files import InputError
from neurons.listen import PortInUse
from neurons.settings import build_settings


def register(app: typer.Typer) -> None:
    app.command("miner")(miner)


def _default(field: str) -> str:
    return f"[default: {MinerSettings.model_fields[field].get_default(call_default_factory=True)}]"


def miner(
    dev_key: DevKeyOpt = None,
    wallet_name: NeuronWalletOpt = None,
    wallet_hotkey: HotkeyOpt = "default",
    wallet_path: WalletPathOpt = None,
    host: Annotated[Optional[str], typer.Option(help=f"Address to listen on.  {_default('host')}")] = None,
    port: Annotated[
        Optional[int], typer.Option(help=f"Port to listen on; 0 picks a free one.  {_default('port')}")
    ] = None,
    netuid: Annotated[Optional[int], typer.Option(help=f"Subnet uid.  {_default('netuid')}")] = None,
    planner: Annotated[
        Optional[str],
        typer.Option(
            "--planner",
            help="Planner: good | naive | invalid | precompute, an installed dagnet.planners entry point, or "
            "package.module:attr (docs/planner.md); its options are [planner.options].  [default: good]",
        ),
    ] = None,
    metagraph_file: Annotated[
        Optional[Path],
        typer.Option(help="Metagraph snapshot JSON, re-read when it changes (tests, offline runs).  [default: none]"),
    ] = None,
    network: MinerNetworkOpt = None,
    endpoint: EndpointOpt = None,
    external_host: Annotated[
        Optional[str],
        typer.Option("--external-host", help="Address advertised on chain.  [default: the listening host]"),
    ] = None,
    sync_every: Annotated[int, typer.Option("--sync-every", min=1, help="Re-read the metagraph every N blocks.")] = 5,
    workers: Annotated[Optional[int], typer.Option(help=f"Worker processes.  {_default('workers')}")] = None,
    provider_tasks: Annotated[
        Optional[Path],
        typer.Option(
            metavar="TASKSET",
            help="v2 (the shipped task families) or a task-set file: play each task's subnet profile "
            "for its nodes (local networks).  [default: none]",
        ),
    ] = None,
    config: Annotated[
        Optional[Path],
        typer.Option(
            "--config",
            metavar="FILE",
            help="Settings file (TOML or JSON) with any MinerSettings field.  [default: none]",
        ),
    ] = None,
    sets: Annotated[
        Optional[list[str]],
        typer.Option(
            "--set",
            metavar="KEY=VALUE",
            help="Override one setting, e.g. rate_limit.burst=200, min_stake=1000 (repeatable; after --config).",
        ),
    ] = None,
    insecure_no_auth: Annotated[
        bool, typer.Option("--insecure-no-auth", help="Serve without signatures or blacklist (benchmarks only).")
    ] = False,
    log_level: Annotated[str, typer.Option(help="debug | info | warning | error.")] = "info",
) -> None:
    """Run a miner: the signed HTTP API with its planner (--planner) and the reference tools, until interrupted.

    Settings: defaults, then --config FILE, then each --set, then the flags above.
    """
    flags: dict[str, Any] = {"host": host, "port": port, "netuid": netuid, "workers": workers, "planner.name": planner}
    try:
        if provider_tasks is not None:
            from neurons.localrun import load_taskset

            flags["provider_tasks"] = {task.task_id: task.available_tools for task in load_taskset(provider_tasks)}
        settings = build_settings(MinerSettings, config_file=config, overrides=sets or (), flags=flags)
    except InputError as exc:
        fail(str(exc))
    from neurons.miner import MinerProcessConfig, serve_miner
    from sandbox.lifetime import reap_adopted

    reap_adopted()  # before the sandbox's probe: what its runs orphan comes back to the miner, which reaps it
    try:
        process = MinerProcessConfig(
            settings=settings,
            dev_key=dev_key,
            wallet_name=wallet_name,
            wallet_hotkey=wallet_hotkey,
            wallet_path=wallet_path,
            metagraph_file=metagraph_file,
            network=network,
            chain_endpoint=endpoint,
            external_host=external_host,
            sync_every_blocks=sync_every,
            auth_enabled=not insecure_no_auth,
            log_level=log_level,
        )
        process.check()
    except ValueError as exc:
        fail(describe(exc))
    if metagraph_file is None and network is None and endpoint is None:
        fail(NO_METAGRAPH)  # a miner never picks a chain on its own: without one it would serve 503 for ever
    configure_logging(log_level)
    try:
        serve_miner(process)
    except PortInUse as exc:
        fail(f"port {exc.port} is in use (--port)")
    except OSError as exc:  # the address is not ours to bind
        fail(f"cannot serve on {settings.host}:{settings.port}: {exc.strerror or exc}")
