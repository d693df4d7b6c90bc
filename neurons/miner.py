"""The miner process: ``python -m neurons.miner`` (and ``dagnet miner``).

Turns flags, an optional settings file and a hotkey into a running miner:
the app from :func:`miner.app.create_app` served by uvicorn on one socket,
shared by ``--workers`` processes (each builds its own app; replay protection
then lives in a shared SQLite file). The metagraph comes from a JSON file
(``--metagraph-file``, re-read when it changes) until the chain adapter lands.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from miner.app import HasHotkey, create_app
from miner.config import MinerSettings
from miner.metagraph import FileMetagraph, MetagraphSource, StaticMetagraph
from miner.planner import get_planner
from miner.tools.registry import default_registry
from protocol.errors import format_validation_error

log = logging.getLogger("dagnet.miner")


class MinerProcessConfig(BaseModel):
    """Everything one miner process needs; picklable, so workers rebuild from it.

    The hotkey is a wallet (``wallet_name``/``wallet_hotkey``/``wallet_path``)
    or a development URI (``dev_key``, e.g. ``//Bob``), exactly one of them.
    ``auth_enabled=False`` serves without signatures, blacklist or rate limit:
    for local benchmarks only.
    """

    model_config = ConfigDict(extra="forbid")

    settings: MinerSettings = MinerSettings()
    dev_key: str | None = None
    wallet_name: str | None = None
    wallet_hotkey: str = "default"
    wallet_path: str | None = None
    metagraph_file: Path | None = None
    auth_enabled: bool = True
    log_level: str = "info"

    @model_validator(mode="after")
    def _one_key_source(self) -> MinerProcessConfig:
        if (self.dev_key is None) == (self.wallet_name is None):
            raise ValueError("give exactly one of a wallet (--wallet-name) or a dev key (--dev-key)")
        return self

    def hotkey(self) -> HasHotkey:
        """The miner's hotkey keypair, from the dev URI or the wallet's hotkey file."""
        if self.dev_key is not None:
            from bittensor.sp_core import Keypair

            return Keypair.create_from_uri(self.dev_key)
        import bittensor as bt

        kwargs = {"path": self.wallet_path} if self.wallet_path else {}
        return bt.Wallet(self.wallet_name, self.wallet_hotkey, **kwargs).hotkey

    def metagraph(self) -> MetagraphSource:
        if self.metagraph_file is None:
            return StaticMetagraph(None)
        return FileMetagraph(self.metagraph_file)


def build_miner_app(config: MinerProcessConfig) -> FastAPI:
    """The app for ``config``: real tools, the configured planner strategy."""
    return create_app(
        config.settings,
        keypair=config.hotkey(),
        metagraph=config.metagraph(),
        registry=default_registry(),
        planner=get_planner(config.settings.strategy),
        auth_enabled=config.auth_enabled,
    )


def serve_miner(config: MinerProcessConfig) -> None:
    """Serve until interrupted. Blocks; returns after a clean shutdown.

    The socket is bound and listening before workers start, so ``port=0``
    works and clients may connect as soon as the chosen address is printed
    (``dagnet miner listening on http://HOST:PORT`` on stderr).
    """
    settings = config.settings
    hotkey = config.hotkey().ss58_address  # fail fast on a bad key, before binding
    get_planner(settings.strategy)  # and on an unknown strategy
    uv_config = uvicorn.Config(
        functools.partial(build_miner_app, config),
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        log_level=config.log_level,
        access_log=False,
        lifespan="off",
        timeout_keep_alive=30,
        backlog=4096,
    )
    sock = uv_config.bind_socket()
    sock.listen(uv_config.backlog)  # connections queue from now on, while workers start
    host, port = sock.getsockname()[:2]
    _announce(f"dagnet miner listening on http://{host}:{port} hotkey={hotkey} workers={settings.workers}")
    if config.metagraph_file is None:
        log.warning("no --metagraph-file: every signed request gets 503 until a metagraph is configured")
    if not config.auth_enabled:
        log.warning("auth is OFF: anyone can call this miner (benchmarks only)")
    if settings.workers > 1:
        uvicorn.supervisors.Multiprocess(uv_config, sockets=[sock]).run()
    else:
        uvicorn.Server(uv_config).run(sockets=[sock])


def _announce(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# -- command line -------------------------------------------------------------------

cli = typer.Typer(add_completion=False, help="Run a dagnet miner.")


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(f"cannot read {what} {path}: {exc}") from None


def _settings(
    config_file: Path | None, provider_subnets: Path | None, provider_tasks: Path | None, overrides: dict[str, Any]
) -> MinerSettings:
    data: dict[str, Any] = _read_json(config_file, "settings file") if config_file else {}
    if not isinstance(data, dict):
        raise typer.BadParameter(f"settings file {config_file} must hold a JSON object")
    if provider_subnets is not None:
        data["provider_subnets"] = _read_json(provider_subnets, "provider subnets file")
    if provider_tasks is not None:
        data["provider_tasks"] = _task_profiles(_read_json(provider_tasks, "task set"), provider_tasks)
    for key, value in overrides.items():
        if isinstance(value, dict):  # a nested section: merge the given fields into it
            given = {k: v for k, v in value.items() if v is not None}
            if given:
                base = data.get(key)
                data[key] = {**base, **given} if isinstance(base, dict) else given
        elif value is not None:
            data[key] = value
    return MinerSettings.model_validate(data)


def _task_profiles(taskset: Any, path: Path) -> dict[str, Any]:
    """``{task_id: available_tools}`` of a task set file."""
    try:
        return {task["task_id"]: task["available_tools"] for task in taskset["tasks"]}
    except (KeyError, TypeError) as exc:
        raise typer.BadParameter(f"{path} is not a task set: missing {exc}") from None


@cli.command()
def miner(
    dev_key: Annotated[str | None, typer.Option(help="Development key URI, e.g. //Bob.")] = None,
    wallet_name: Annotated[str | None, typer.Option(help="Wallet (coldkey) name.")] = None,
    wallet_hotkey: Annotated[str, typer.Option(help="Hotkey name in the wallet.")] = "default",
    wallet_path: Annotated[str | None, typer.Option(help="Wallets directory.")] = None,
    metagraph_file: Annotated[
        Path | None, typer.Option(help="Metagraph snapshot JSON; re-read when it changes.")
    ] = None,
    config: Annotated[Path | None, typer.Option(help="MinerSettings as a JSON file; flags override it.")] = None,
    host: Annotated[str | None, typer.Option()] = None,
    port: Annotated[int | None, typer.Option(help="0 picks a free port.")] = None,
    netuid: Annotated[int | None, typer.Option()] = None,
    strategy: Annotated[str | None, typer.Option(help="Planner strategy: good | naive (or the attackers invalid | precompute).")] = None,
    workers: Annotated[int | None, typer.Option(help="uvicorn worker processes.")] = None,
    max_body_bytes: Annotated[int | None, typer.Option()] = None,
    rate_limit: Annotated[float | None, typer.Option(help="Requests/s per hotkey.")] = None,
    rate_burst: Annotated[int | None, typer.Option(help="Token bucket size per hotkey.")] = None,
    min_stake: Annotated[float | None, typer.Option()] = None,
    require_validator_permit: Annotated[bool | None, typer.Option("--require-permit/--no-require-permit")] = None,
    max_concurrency: Annotated[int | None, typer.Option()] = None,
    nonce_db: Annotated[Path | None, typer.Option(help="Shared nonce SQLite file (workers > 1).")] = None,
    auth_max_age: Annotated[float | None, typer.Option(help="Signature freshness window, seconds.")] = None,
    provider_subnets: Annotated[
        Path | None, typer.Option(help="JSON {subnet: {type, avg_cost, avg_latency}} this miner serves.")
    ] = None,
    provider_tasks: Annotated[
        Path | None, typer.Option(help="A task set: play each task's subnet profile for its nodes (local networks).")
    ] = None,
    insecure_no_auth: Annotated[
        bool, typer.Option("--insecure-no-auth", help="Serve without auth (benchmarks only).")
    ] = False,
    log_level: Annotated[str, typer.Option()] = "info",
) -> None:
    """Serve the miner's signed HTTP API until interrupted."""
    overrides = {
        "host": host,
        "port": port,
        "netuid": netuid,
        "strategy": strategy,
        "workers": workers,
        "max_body_bytes": max_body_bytes,
        "rate_limit": {"per_second": rate_limit, "burst": rate_burst},
        "min_stake": min_stake,
        "require_validator_permit": require_validator_permit,
        "max_concurrency": max_concurrency,
        "nonce_db": str(nonce_db) if nonce_db else None,
        "auth": {"max_age_s": auth_max_age},
    }
    try:
        process_config = MinerProcessConfig(
            settings=_settings(config, provider_subnets, provider_tasks, overrides),
            dev_key=dev_key,
            wallet_name=wallet_name,
            wallet_hotkey=wallet_hotkey,
            wallet_path=wallet_path,
            metagraph_file=metagraph_file,
            auth_enabled=not insecure_no_auth,
            log_level=log_level,
        )
    except ValidationError as exc:
        raise typer.BadParameter(format_validation_error(exc)) from None
    logging.basicConfig(level=log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        serve_miner(process_config)
    except (KeyError, OSError, ValueError) as exc:
        _announce(f"error: {exc}")
        raise typer.Exit(1) from None


if __name__ == "__main__":
    cli()
