"""The validator process: ``dagnet validator`` (and ``python -m neurons.validator``).

Turns a :class:`ValidatorProcessConfig` (built by :mod:`neurons.commands.validator`)
into a running :class:`validator.loop.ValidatorLoop` with its state file, and serves ``/health`` and ``/metrics`` on one port from
the same event loop. SIGINT/SIGTERM stop it between two awaits; whatever step
was settled stays settled (the state commits each step in one transaction).
``--replay RECORD`` re-scores one stored execution instead of running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from typing import Any, cast

import uvicorn
from fastapi import FastAPI, HTTPException, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import model_validator

from chain.base import Chain
from engine.executor import ExecutorConfig
from engine.owned import OwnedRunnerFactory
from miner.server import guarded_config
from miner.settings import ServerLimits
from neurons.keys import open_wallet
from neurons.listen import bind
from neurons.localrun import load_task_source
from protocol.hints import HintTier
from protocol.metagraph import MetagraphSnapshot, Peer
from protocol.runner import NodeRunner
from protocol.synapse import SCORING_VERSION
from protocol.task import Task
from protocol.version import package_version, version_fields
from sandbox.lifetime import reap_adopted
from subnets.llm import LLMConfig
from subnets.owned import owned_runner
from subnets.world import ADVERTISED, World, world_for
from validator.adapters import BySubnet
from validator.client import ClientConfig, MinerClient
from validator.health import REASONS as HEALTH_REASONS
from validator.health import Health, HealthInputs, assess
from validator.loop import LoopConfig, TaskSource, ValidatorLoop, WorldNotOver, WorldNotPlayed
from validator.prometheus import ValidatorMetrics
from validator.providers import (
    EVERY_SUBNET,
    FixedProviders,
    MetagraphProviders,
    MetagraphReader,
    Provider,
    ProviderDirectory,
    ProviderTable,
)
from validator.reference import reference
from validator.settings import OpenAIAdapter, ProviderEntry, ValidatorSettings
from validator.sources import CodeGate, GatedTasks, drawn_source, start_sandbox_check
from validator.state import ValidatorState
from validator.validation import StepBounds

log = logging.getLogger("dagnet.validator")

HEALTH_LIMITS = ServerLimits(head_timeout_s=5.0, body_timeout_s=5.0, max_connections=64)
"""The ``/health`` + ``/metrics`` server's per-connection limits, enforced by the
miner's connection guard (:mod:`miner.server`): heads of at most 16 KiB, 5 s to send
one (a scraper sends its GET at once), and 64 connections, so a flood on this port
never takes the descriptors the validator's miner queries need."""


class ValidatorProcessConfig(ValidatorSettings):
    """Everything one validator process needs: its settings, and the key and chain
    that are not settings.

    The hotkey is a wallet (``wallet_name``/``wallet_hotkey``/``wallet_path``) or
    a development URI (``dev_key``), exactly one of them. ``network`` takes the
    Bittensor names (``finney``, ``test``, ``local``, a ``ws://`` URL) or
    ``embedded[:PATH]``.
    """

    dev_key: str | None = None
    wallet_name: str | None = None
    wallet_hotkey: str = "default"
    wallet_path: str | None = None
    network: str | None = None
    chain_endpoint: str | None = None

    @model_validator(mode="after")
    def _one_key_source(self) -> ValidatorProcessConfig:
        if (self.dev_key is None) == (self.wallet_name is None):
            raise ValueError("give exactly one of a wallet (--wallet-name) or a dev key (--dev-key)")
        return self

    def wallet(self) -> Any:
        """A ``bt.Wallet`` whose hotkey signs, or a dev key standing in for one.

        Raises ``ValueError`` saying which key could not be loaded and why.
        """
        return open_wallet(self.dev_key, self.wallet_name, self.wallet_hotkey, self.wallet_path)

    def executor_config(self) -> ExecutorConfig:
        return ExecutorConfig(max_frames=self.max_frames, max_frame_instances=self.max_frame_instances)

    def loop_config(self) -> LoopConfig:
        return LoopConfig(
            sample_size=self.sample_size,
            exec_concurrency=self.exec_concurrency,
            poll_s=self.poll_s,
            tier_shares=cast("dict[HintTier, float]", self.tier_shares),  # its keys checked by the settings
            step_bounds=StepBounds(work_s=self.step_work_s, deadline_s=self.step_deadline_s),
        )


def open_chain(config: ValidatorProcessConfig, wallet: Any) -> tuple[Chain, ProviderTable | None]:
    """The chain the config names, and the external tool providers its adapters name
    (``None``: no dagnet adapter, the validator executes every plan itself)."""
    from chain.network import parse_network
    from chain.sdk import SdkChain

    network = parse_network(config.network, config.chain_endpoint, default=None)  # never finney by default
    chain = SdkChain.open(network, wallet, config.netuid)

    async def read(netuid: int) -> MetagraphSnapshot:  # a read-only view of another subnet, opened once
        if netuid not in readers:
            readers[netuid] = SdkChain.open(network, None, netuid)
        return await readers[netuid].metagraph()

    readers: dict[int, Chain] = {}
    return chain, provider_table(config, read)


async def reached(chain: Chain, providers: ProviderTable | None) -> tuple[Chain, ProviderTable | None]:
    """``chain`` once it has answered with its subnet's metagraph: at start, a chain that
    cannot be reached (after the SDK's retries) or has no such subnet raises the
    :class:`~chain.base.ChainError` that names it, and the validator exits 2."""
    try:
        await chain.metagraph()
    except BaseException:
        await chain.close()
        raise
    return chain, providers


def provider_table(settings: ValidatorSettings, read: MetagraphReader) -> ProviderTable | None:
    """The dagnet adapters of ``settings`` as one directory; ``None`` when there is none.
    ``read`` reads the metagraph of a netuid a ``{"netuid": N}`` adapter names."""
    entries: dict[str, ProviderDirectory] = {}
    for key, adapter in settings.dagnet_adapters().items():
        if adapter.netuid is not None:
            entries[key] = MetagraphProviders(read, adapter.netuid)
        else:
            entries[key] = FixedProviders([_provider(entry) for entry in adapter.providers or ()])
    return ProviderTable(entries) if entries else None


def _provider(entry: ProviderEntry) -> Provider:
    return Provider(Peer(entry.uid, entry.hotkey, entry.url), entry.coldkey)


def owned_runners(settings: ValidatorSettings) -> OwnedRunnerFactory:
    """The owned runner, with the ``llm`` action of each subnet that has an openai adapter
    answered by that endpoint (``"*"``: every other subnet's)."""
    models = {key: _llm_config(adapter) for key, adapter in settings.openai_adapters().items()}
    if not models:
        return owned_runner
    default = models.pop(EVERY_SUBNET, None)

    def build(task: Task, *, world: World = ADVERTISED) -> NodeRunner:
        routes = {
            subnet: owned_runner(task, llm=models[subnet], world=world)
            for subnet in task.available_tools
            if subnet in models
        }
        return BySubnet(routes, owned_runner(task, llm=default, world=world))

    return build


def _llm_config(adapter: OpenAIAdapter) -> LLMConfig:
    key = os.environ.get(adapter.api_key_env) if adapter.api_key_env else None
    if adapter.api_key_env and not key:
        raise ValueError(f"adapters: the environment variable {adapter.api_key_env} (api_key_env) is not set")
    return LLMConfig(base_url=adapter.base_url, model=adapter.model, api_key=key, timeout_s=adapter.timeout_s)


def health_app(
    loop: ValidatorLoop, metrics: ValidatorMetrics, sandbox: asyncio.Future[str | None] | None = None
) -> FastAPI:
    """``/health`` (``ok`` or ``degraded`` with its reasons, :mod:`validator.health`) and
    ``/metrics``, whose ``dagnet_validator_degraded`` gauges read the same assessment.
    ``sandbox`` is the start-up sandbox check (:func:`start_sandbox_check`)."""
    app = FastAPI(title="dagnet validator", docs_url=None, redoc_url=None, openapi_url=None)

    def assessed() -> Health:
        return assess(HealthInputs.of(loop, metrics, sandbox))

    metrics.watch_health(HEALTH_REASONS, lambda: assessed().codes())

    @app.get("/health")
    def health() -> dict[str, Any]:
        state = loop.state
        verdict = assessed()
        return {
            "status": verdict.status,
            "reasons": [reason.message for reason in verdict.reasons],
            "hotkey": loop.hotkey,
            "netuid": loop.chain.netuid,
            "version": package_version(),
            "scoring_version": SCORING_VERSION,
            "version_key": loop.config.version_key,
            "chain_weights_version": None if loop.hyperparameters is None else loop.hyperparameters.weights_version,
            "upgrade": loop.view.upgrade,
            "last_step_block": state.last_step_block(),
            "last_weights_block": state.last_weights_block(),
            "steps_settled": state.steps_settled(),
        }

    @app.get("/world/{tempo}")
    def world(tempo: int) -> dict[str, Any]:
        """A past tempo's hidden world (docs/validator.md, auditing a record); 403 for the
        current tempo or a future one, 404 for one this validator did not play."""
        if loop.worlds is None:
            raise HTTPException(404, "this validator plays the advertised profile")
        try:
            return loop.past_world(tempo).to_json()
        except WorldNotOver as exc:
            raise HTTPException(403, str(exc)) from None
        except WorldNotPlayed as exc:
            raise HTTPException(404, str(exc)) from None

    @app.get("/metrics")
    def metrics_route() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return app


async def run_validator(
    config: ValidatorProcessConfig,
    *,
    chain: Chain | None = None,
    providers: ProviderDirectory | None = None,
    source: TaskSource | None = None,
    stop: asyncio.Event | None = None,
    reset: bool = False,
) -> None:
    """Run until ``stop`` is set (or SIGINT/SIGTERM). ``chain``/``providers``/``source``
    replace what the config would open (tests). ``reset`` lets a state file that is
    empty, has lost its secret or has a weak one start with a new secret
    (:class:`~validator.state.StateRefused` otherwise). A state file this call made is
    removed when it ends before any step settled."""
    wallet = config.wallet()
    reap_adopted()  # what its sandbox runs orphan comes back to it, and is reaped (sandbox/lifetime.py)
    sock = bind(config.host, config.port)  # first: a port in use leaves no state file behind
    try:
        state = ValidatorState(config.state, reset=reset)  # before the chain: a refused file touches no chain
        try:
            if chain is None:
                chain, providers = await reached(*open_chain(config, wallet))
        except BaseException:
            state.close(discard_unused=True)
            raise
    except BaseException:
        sock.close()
        raise
    stop = stop or asyncio.Event()
    _stop_on_signals(stop)
    metrics = ValidatorMetrics()
    client_config = ClientConfig(timeout_s=config.query_timeout_s)
    try:
        async with MinerClient(wallet.hotkey, config=client_config) as client:
            sandbox_check = start_sandbox_check()
            gate = CodeGate(sandbox_check)
            loop = ValidatorLoop(
                chain,
                state,
                client,
                GatedTasks(source or load_task_source(config.tasks), gate),
                providers,
                owned_runner=owned_runners(config),
                reference=reference(),
                drawn=drawn_source(config.tasks, config.drawn_per_tempo, gate) if source is None else None,
                worlds=world_for,
                config=config.loop_config(),
                executor_config=config.executor_config(),
                metrics=metrics,
            )
            async with _serving(health_app(loop, metrics, sandbox_check), sock) as url:
                _announce(
                    f"dagnet validator listening on {url} hotkey={loop.hotkey} netuid={chain.netuid} "
                    f"state={config.state} resumed_at_block={state.last_step_block()} {version_fields()}"
                )
                await loop.run(stop)
    finally:
        sock.close()
        state.close(discard_unused=True)
        await chain.close()


@contextlib.asynccontextmanager
async def _serving(app: FastAPI, sock: socket.socket):
    """Serve ``app`` on ``sock`` from this event loop, behind the connection guard
    (:data:`HEALTH_LIMITS`); yields the URL."""
    config = guarded_config(app, HEALTH_LIMITS, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    server.install_signal_handlers = lambda: None  # type: ignore[attr-defined]  # FIXME: uvicorn>=0.29 never calls it (serve() captures SIGINT/SIGTERM itself)
    host, port = sock.getsockname()[:2]
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        await task


def _stop_on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)


def _announce(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":  # ``python -m neurons.validator ...`` is ``dagnet validator ...``
    from neurons.cli import main

    main(["validator", *sys.argv[1:]])
