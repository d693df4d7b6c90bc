"""The miner process: ``dagnet miner`` (and ``python -m neurons.miner``).

Turns a :class:`MinerProcessConfig` (built by :mod:`neurons.commands.miner`) into a
running miner: the app from :func:`miner.app.create_app` served by uvicorn on one socket,
shared by ``--workers`` processes (each builds its own app; replay protection
then lives in a shared SQLite file). The metagraph comes from the chain
(``--network``: each worker follows it in the background and keeps the axon
served, :mod:`neurons.follow`) or from a JSON file (``--metagraph-file``, re-read
when it changes; for tests and offline runs).
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any, Literal

import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field, model_validator

from miner.app import HasHotkey, create_app
from miner.metagraph import FileMetagraph, MetagraphSource, StaticMetagraph
from miner.readiness import readiness
from miner.server import guarded_config
from miner.serving import ToolMenu
from miner.settings import MinerSettings, default_feedback_db
from neurons.keys import open_wallet
from neurons.listen import bind
from planners import Planner, PlannerLoadError, load_planner
from protocol.metagraph import Axon
from protocol.version import version_fields
from sandbox.lifetime import exit_with_parent
from subnets.registry import default_registry

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
    network: str | None = None
    """``finney | test | local | ws://URL | embedded[:PATH]``: follow this chain's metagraph."""
    chain_endpoint: str | None = None
    external_host: str | None = None
    """The address advertised on chain (default: the bound host)."""
    sync_every_blocks: int = Field(default=5, ge=1)
    chain_poll_s: float = Field(default=1.0, gt=0)
    advertised_port: int | None = None
    """Set by :func:`serve_miner` once the socket is bound (``port=0`` picks one)."""
    auth_enabled: bool = True
    log_level: Literal["critical", "error", "warning", "info", "debug", "trace"] = "info"

    @model_validator(mode="after")
    def _one_key_source(self) -> MinerProcessConfig:
        if (self.dev_key is None) == (self.wallet_name is None):
            raise ValueError("give exactly one of a wallet (--wallet-name) or a dev key (--dev-key)")
        if self.metagraph_file is not None and self.on_chain:
            raise ValueError("give one metagraph source: --metagraph-file or --network, not both")
        return self

    @property
    def on_chain(self) -> bool:
        return self.network is not None or self.chain_endpoint is not None

    def wallet(self) -> Any:
        """What the SDK signs with: the wallet, or a dev key standing in for both its keys.

        Raises ``ValueError`` saying which key could not be loaded and why.
        """
        return open_wallet(self.dev_key, self.wallet_name, self.wallet_hotkey, self.wallet_path)

    def hotkey(self) -> HasHotkey:
        """The miner's hotkey keypair (``ValueError`` as :meth:`wallet`)."""
        return self.wallet().hotkey

    def check(self) -> str:
        """Load the hotkey and the planner once, before serving; the hotkey's address.

        Raises ``ValueError`` for a key or a planner that cannot be loaded, a
        ``--metagraph-file`` that is not there (a file that goes missing later keeps the
        last snapshot, :class:`~miner.metagraph.FileMetagraph`), and a ``serve`` table
        that names an unknown action, or ``python_exec`` without bwrap.
        """
        if self.metagraph_file is not None and not self.metagraph_file.is_file():
            raise ValueError(f"--metagraph-file {self.metagraph_file}: no such file")
        ToolMenu(self.settings.serve, default_registry().names()).check_sandbox()
        address = self.hotkey().ss58_address
        try:
            self.planner()
        except PlannerLoadError as exc:
            raise ValueError(str(exc)) from None
        return address

    def planner(self) -> Planner:
        """A fresh planner as the settings name it (each worker makes its own)."""
        return load_planner(self.settings.planner.name, self.settings.planner.options)

    def metagraph(self) -> MetagraphSource:
        if self.metagraph_file is not None:
            return FileMetagraph(self.metagraph_file, netuid=self.settings.netuid)
        if not self.on_chain:
            return StaticMetagraph(None)
        from neurons.follow import MetagraphFollower

        target = StaticMetagraph(None)
        MetagraphFollower(
            self.open_chain,
            target,
            axon=self.advertised_axon(),
            every_blocks=self.sync_every_blocks,
            poll_s=self.chain_poll_s,
        ).start()
        return target

    def open_chain(self) -> Any:
        from chain.network import parse_network
        from chain.sdk import SdkChain

        network = parse_network(self.network, self.chain_endpoint)
        return SdkChain.open(network, self.wallet(), self.settings.netuid, retries=0)

    def advertised_axon(self) -> Axon | None:
        if self.advertised_port is None:
            return None
        host = self.external_host or self.settings.host
        if host in ("0.0.0.0", "::", ""):
            host = socket.gethostbyname(socket.gethostname())
        return Axon(host=host, port=self.advertised_port)


def build_miner_app(config: MinerProcessConfig) -> FastAPI:
    """The app for ``config``: real tools, the configured planner in its planning processes, started now, feedback kept on disk."""
    exit_with_parent()  # a worker of uvicorn's supervisor (``workers`` > 1) ends with it
    keypair, settings = config.hotkey(), config.settings
    if settings.feedback_db is None:
        settings = settings.model_copy(update={"feedback_db": default_feedback_db(keypair.ss58_address)})
    app = create_app(
        settings,
        keypair=keypair,
        metagraph=config.metagraph(),
        registry=default_registry(),
        planner=config.planner(),
        auth_enabled=config.auth_enabled,
    )
    app.state.planning.warm()  # the planning processes start now, not on the first query
    return app


def serve_miner(config: MinerProcessConfig) -> None:
    """Serve until interrupted. Blocks; returns after a clean shutdown.
    Raises :class:`neurons.listen.PortInUse` (or ``OSError``) when the address cannot be bound.

    The socket is bound and listening before workers start, so ``port=0``
    works and clients may connect as soon as the chosen address is printed
    (``dagnet miner listening on http://HOST:PORT`` on stderr).
    """
    signal.signal(signal.SIGTERM, _stopped)
    settings = config.settings
    hotkey = config.check()  # fail on a bad key or planner before binding
    uv_config = guarded_config(
        functools.partial(build_miner_app, config),
        settings.server,
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        log_level=config.log_level,
        access_log=False,
        lifespan="off",
        backlog=4096,
        # uvicorn kills and restarts a worker that does not answer its ping in time. A
        # worker answers only once its imports (bittensor, numpy, the app) are done, which
        # takes longer than uvicorn's 5 s on a loaded 2-core machine: the workers were then
        # restarted forever and the miner never served. A hung worker is still replaced.
        timeout_worker_healthcheck=60,
    )
    sock = bind(settings.host, settings.port)  # PortInUse names the port; nothing is written before this
    sock.listen(uv_config.backlog)  # connections queue from now on, while workers start
    host, port = sock.getsockname()[:2]
    if config.on_chain:
        config = config.model_copy(update={"advertised_port": port})
        uv_config.app = functools.partial(build_miner_app, config)
    source = (
        f"network={config.network or config.chain_endpoint}"
        if config.on_chain
        else f"metagraph={config.metagraph_file}"
    )
    _announce(
        f"dagnet miner listening on http://{host}:{port} hotkey={hotkey} workers={settings.workers} {source} {version_fields()}"
    )
    if not config.on_chain:  # a chain-fed metagraph syncs in the workers; /health reports it there
        _report_readiness(config.metagraph(), hotkey)
    if not config.auth_enabled:
        log.warning("auth is OFF: anyone can call this miner (benchmarks only)")
    if settings.workers > 1:
        uvicorn.supervisors.Multiprocess(uv_config, sockets=[sock]).run()
    else:
        uvicorn.Server(uv_config).run(sockets=[sock])


EXIT_GRACE_S = 10.0
"""How long a stopped miner may take to exit once SIGTERM reached it outside uvicorn's handler."""


def _stopped(signum: int, frame: object) -> None:
    """SIGTERM outside uvicorn's own handler: before it serves, or re-raised by uvicorn once
    its graceful shutdown is done. Either way a stop that was asked for: exit 0, as a
    supervisor (systemd, pm2) expects of a service it stopped (docs/operating.md).

    A SIGTERM in the middle of start-up (the app half built, its planning processes and
    threads started) left the interpreter waiting on them at exit: 30 s and more in the
    suite at a load of 4. A daemon timer ends the process :data:`EXIT_GRACE_S` later, exit
    0 all the same; what it started dies with it (their parent-death signal)."""
    timer = threading.Timer(EXIT_GRACE_S, os._exit, args=(0,))
    timer.daemon = True
    timer.start()
    raise SystemExit(0)


def _report_readiness(metagraph: MetagraphSource, hotkey: str) -> None:
    """One line at start: registered as which uid, or why the miner is not ready."""
    snapshot = metagraph.snapshot()
    state = readiness(snapshot, hotkey, metagraph.problem())
    if state.ready and snapshot is not None:  # ready: a snapshot is at hand
        log.info("ready: uid %d on netuid %d", state.uid, snapshot.netuid)
    else:
        log.warning("not ready: %s; /health answers 503 until this is fixed", state.reason)


def _announce(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":  # ``python -m neurons.miner ...`` is ``dagnet miner ...``
    from neurons.cli import main

    main(["miner", *sys.argv[1:]])
