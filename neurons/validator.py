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
import dataclasses
import errno
import logging
import os
import signal
import socket
import sys
from pathlib import Path
from collections.abc import Sequence
from typing import Any

import uvicorn
from fastapi import FastAPI, HTTPException, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import model_validator

from chain.base import Chain
from miner.config import ServerLimits
from miner.server import guarded_config
from subnets.llm import LLMConfig
from neurons.keys import open_wallet
from validator.settings import OpenAIAdapter, ProviderEntry, ValidatorSettings
from planners import GoodPlanner
from neurons.localrun import load_task_source
from validator.settings import SHIPPED_TASKS
from subnets.owned import owned_runner
from subnets.world import ADVERTISED, World, world_for
from sandbox import PRIVATE_ISOLATION, SandboxLimits, SandboxUnavailable, isolation_available, run_python
from protocol.metagraph import MetagraphSnapshot, Peer
from protocol.outcomes import RunStatus
from protocol.runner import NodeRunner
from protocol.synapse import TaskPackage, WorkflowSynapse
from protocol.task import Task
from tasks import Family
from tasks.drawn import TYPES as DRAWN_TYPES, drawn_families, solves
from planners.naive import naive_with_retries
from engine.owned import evaluate_owned
from protocol.validation import check_plan_for
from validator.audit import recorded_task, replay, replay_margin
from validator.client import ClientConfig, MinerClient
from engine.executor import ExecutorConfig
from validator.lifecycle import Reference
from validator.loop import LoopConfig, TaskSource, ValidatorLoop, WorldNotOver
from validator.sampling import DrawnFamilies
from validator.step import StepBounds
from validator.health import REASONS as HEALTH_REASONS, Health, HealthInputs, assess
from validator.prometheus import ValidatorMetrics
from validator.adapters import BySubnet
from engine.owned import OwnedRunnerFactory
from validator.providers import (
    EVERY_SUBNET, FixedProviders, MetagraphProviders, MetagraphReader, Provider, ProviderDirectory, ProviderTable,
)
from validator.state import Capped, ValidatorState

log = logging.getLogger("dagnet.validator")

HEALTH_LIMITS = ServerLimits(head_timeout_s=5.0, body_timeout_s=5.0, max_connections=64)
"""The ``/health`` + ``/metrics`` server's per-connection limits, enforced by the
miner's connection guard (:mod:`miner.server`): heads of at most 16 KiB, 5 s to send
one (a scraper sends its GET at once), and 64 connections, so a flood on this port
never takes the descriptors the validator's miner queries need."""


class PortInUseError(Exception):
    """The ``/health`` port is held by another process."""


DEFAULT_TASKS = SHIPPED_TASKS


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
        return LoopConfig(sample_size=self.sample_size, exec_concurrency=self.exec_concurrency, poll_s=self.poll_s,
                          tier_shares=self.tier_shares,
                          step_bounds=StepBounds(work_s=self.step_work_s, deadline_s=self.step_deadline_s))


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
        routes = {subnet: owned_runner(task, llm=models[subnet], world=world)
                  for subnet in task.available_tools if subnet in models}
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
        return assess(health_inputs(loop, metrics, sandbox))

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
            "version_key": loop.config.version_key,
            "last_step_block": state.last_step_block(),
            "last_weights_block": state.last_weights_block(),
            "steps_settled": state.steps_settled(),
        }

    @app.get("/world/{tempo}")
    def world(tempo: int) -> dict[str, Any]:
        """A past tempo's hidden world (docs/validator.md, auditing a record); 403 for the
        current tempo, a future one, or none played."""
        if loop.worlds is None:
            raise HTTPException(404, "this validator plays the advertised profile")
        try:
            return loop.past_world(tempo).to_json()
        except WorldNotOver as exc:
            raise HTTPException(403, str(exc)) from None

    @app.get("/metrics")
    def metrics_route() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return app


def health_inputs(loop: ValidatorLoop, metrics: ValidatorMetrics, sandbox: asyncio.Future[str | None] | None) -> HealthInputs:
    """What the running loop knows now, for :func:`validator.health.assess`."""
    hyper = loop.hyperparameters
    return HealthInputs(
        hotkey=loop.hotkey, recent_steps=tuple(loop.step_outcomes), snapshot=loop.snapshot,
        metagraph_age_s=metrics.metagraph_age_s(), uptime_s=metrics.uptime_s(),
        tempo=None if hyper is None else hyper.tempo, last_weights_block=loop.state.last_weights_block(),
        first_block=metrics.first_block, sandbox_problem=_settled(sandbox), state_problem=loop.state.write_problem,
        chain_problem=loop.view.chain_problem,
    )


def _settled(check: asyncio.Future[str | None] | None) -> str | None:
    if check is None or not check.done() or check.cancelled():
        return None
    return check.result()


SANDBOX_WARNING = "sandbox unavailable: no code task is sent, miners are scored on the rest — see docs/sandbox.md"


def sandbox_problem() -> str | None:
    """Why this machine cannot judge code (``None``: it can): the isolation the code
    scorer requires, then one tiny program run through it. Blocking: seconds at most."""
    isolation = isolation_available()
    if isolation != PRIVATE_ISOLATION:
        return f"isolation here is {isolation}, and code is judged only under {PRIVATE_ISOLATION}"
    try:
        run = run_python({"check.py": "print(6 * 7)"}, ["check.py"], limits=SandboxLimits(cpu_seconds=5, wall_seconds=15))
    except (SandboxUnavailable, OSError) as exc:
        return f"a test run could not start: {exc}"
    if run.returncode != 0 or run.stdout.strip() != "42":
        return f"a test run exited {run.returncode}: {run.stderr.strip()[-300:]}"
    return None


def start_sandbox_check() -> asyncio.Task[str | None]:
    """:func:`sandbox_problem` in a worker thread, so start-up is not held up; logs one
    warning when code cannot be judged. Call from the running loop."""

    async def check() -> str | None:
        try:
            problem = await asyncio.to_thread(sandbox_problem)
        except Exception as exc:  # a broken check is itself a sandbox that cannot be trusted
            problem = f"the check failed: {exc!r}"
        if problem is not None:
            log.warning("%s (%s)", SANDBOX_WARNING, problem)
        return problem

    return asyncio.get_running_loop().create_task(check(), name="sandbox-check")


class CodeGate:
    """Whether this validator sends code tasks: only once its start-up sandbox check
    (:func:`start_sandbox_check`) has passed. A validator that cannot judge code sends no
    code task, curated or drawn, and scores miners on the rest, rather than failing every
    step that drew one; ``/health`` names the sandbox meanwhile."""

    def __init__(self, check: asyncio.Future[str | None]) -> None:
        self._check = check

    def judges_code(self) -> bool:
        check = self._check
        return check.done() and not check.cancelled() and check.result() is None

    def types(self) -> tuple[str, ...]:
        """The task types families are drawn from now."""
        return DRAWN_TYPES if self.judges_code() else tuple(t for t in DRAWN_TYPES if t != "code")


class GatedTasks:
    """``source`` less its code tasks while ``gate`` keeps code out."""

    def __init__(self, source: TaskSource, gate: CodeGate) -> None:
        self._source, self._gate = source, gate

    def tasks(self) -> Sequence[Task]:
        judges_code = self._gate.judges_code()
        return [task for task in self._source.tasks() if judges_code or task.task_type != "code"]

    def instance(self, task: Task, seed: int) -> Task:
        return self._source.instance(task, seed)


class DrawnTasks:
    """Families drawn for one tempo as a task source: each shown with its public example,
    an instance drawn by its own generator."""

    def __init__(self, families: Sequence[Family]) -> None:
        self._families = {f.task_id: f for f in families}

    def tasks(self) -> tuple[Task, ...]:
        return tuple(f.task(f.example()) for f in self._families.values())

    def instance(self, task: Task, seed: int) -> Task:
        found = self._families[task.task_id]
        return found.task(found.instance(seed))


def drawn_source(tasks: Path, per_tempo: int, gate: CodeGate | None = None) -> DrawnFamilies | None:
    """The families a validator draws per tempo besides the shipped ones (``tasks.drawn``,
    each checked by running its reference plan, :func:`reference_failure`), of the types
    ``gate`` lets through (every type without one); ``None`` for a task-set file or ``per_tempo`` 0."""
    if tasks != SHIPPED_TASKS or per_tempo <= 0:
        return None
    return lambda secret, tempo: DrawnTasks(drawn_families(
        secret, tempo, per_tempo, verify=reference_solves, types=DRAWN_TYPES if gate is None else gate.types()))


def reference_failure(family: Family, seed: int) -> str | None:
    """The executing check's run of one instance (:data:`tasks.drawn.SeedRun`): the
    family's ``naive+retries`` plan on owned execution and simulated time, as a
    validator runs a miner's plan; it must complete with quality 1."""
    proposal = naive_with_retries(family.package)
    task = family.task(family.instance(seed))
    evaluation = evaluate_owned(proposal.plan, check_plan_for(proposal.plan, task), task, owned_runner(task),
                                total_estimated_cost=proposal.total_estimated_cost)
    score, execution = evaluation.score, evaluation.execution
    if execution.status == RunStatus.COMPLETED and score.completion_ratio == 1 and score.output_quality == 1:
        return None
    failed = {node: record.reason or record.status for node, record in execution.nodes.items()
              if record.status != "success"}
    return (f"reference plan does not solve seed {seed}: {execution.status}, quality "
            f"{score.output_quality:.3f}, completion {score.completion_ratio:.3f} {failed or ''}").rstrip()


reference_solves = solves(reference_failure)
"""The executing check every drawn family passes before a validator sends it."""


def reference() -> Reference:
    """How the validator judges a task (validator/lifecycle.py): the ``good`` reference
    planner, its search bounded by counted steps alone so every validator gets the same
    plan whatever its load, its plan run by owned execution on the reference tools."""

    def plan(package: TaskPackage) -> WorkflowSynapse:
        return GoodPlanner(timed=False).plan(package).answer(package, miner_uid=0)

    return Reference(planner=plan, runner=owned_runner)


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
    empty or has lost its secret start with a new secret (:class:`~validator.state.StateRefused`
    otherwise)."""
    wallet = config.wallet()
    sock = _listen(config.host, config.port)  # first: a port in use leaves no state file behind
    try:
        state = ValidatorState(config.state, reset=reset)  # before the chain: a refused file touches no chain
        try:
            if chain is None:
                chain, providers = await reached(*open_chain(config, wallet))
        except BaseException:
            state.close()
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
                chain, state, client, GatedTasks(source or load_task_source(config.tasks), gate), providers,
                owned_runner=owned_runners(config), reference=reference(),
                drawn=drawn_source(config.tasks, config.drawn_per_tempo, gate) if source is None else None,
                worlds=world_for, config=config.loop_config(),
                executor_config=config.executor_config(), metrics=metrics,
            )
            async with _serving(health_app(loop, metrics, sandbox_check), sock) as url:
                _announce(
                    f"dagnet validator listening on {url} hotkey={loop.hotkey} netuid={chain.netuid} "
                    f"state={config.state} resumed_at_block={state.last_step_block()}"
                )
                await loop.run(stop)
    finally:
        sock.close()
        state.close()
        await chain.close()


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket of ``/health`` and ``/metrics``."""
    try:
        return socket.create_server((host, port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise PortInUseError(f"port {port} is in use (--port)") from None
        raise


@contextlib.asynccontextmanager
async def _serving(app: FastAPI, sock: socket.socket):
    """Serve ``app`` on ``sock`` from this event loop, behind the connection guard
    (:data:`HEALTH_LIMITS`); yields the URL."""
    config = guarded_config(app, HEALTH_LIMITS, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    server.install_signal_handlers = lambda: None  # the validator owns SIGINT/SIGTERM
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


def replay_record(
    config_state: Path, tasks: Path, record_id: int, drawn_per_tempo: int = ValidatorSettings().drawn_per_tempo
) -> dict[str, Any]:
    """Re-score one stored execution; the result says whether it matched bit for bit
    (``None``: nothing could be compared) and what a capped record left unchecked. A
    drawn family is drawn again from the state's secret and the record's tempo. A record
    with a margin has the reference replayed on its instance, tier and world too
    (:func:`validator.audit.replay_margin`): identical means the margin is, too."""
    state = ValidatorState(config_state)
    try:
        record = state.execution(record_id)
        secret = state.instance_secret()
    finally:
        state.close()
    if record is None:
        raise LookupError(f"no execution record {record_id} in {config_state}")
    source, drawn = load_task_source(tasks), drawn_source(tasks, drawn_per_tempo)
    world = None
    if record.world_tempo is not None:  # the record ran in that tempo's hidden world: run it there again
        tools = recorded_task(record, source, drawn=drawn, secret=secret).available_tools
        world = world_for(secret, record.world_tempo, tools)
    result = replay(record, source, drawn=drawn, secret=secret, world=world)
    stored = dataclasses.asdict(result.stored) if isinstance(result.stored, Capped) else result.stored
    identical, margin = result.identical, None
    if record.reference_S is not None:  # the reference's run beside the miners, replayed: the same margin
        again = replay_margin(record, source, reference(), drawn=drawn, secret=secret, world=world)
        margin = {"stored": {"reference_S": record.reference_S, "margin": record.margin},
                  "recomputed": dataclasses.asdict(again), "identical": again.matches(record)}
        identical = None if identical is None else identical and again.matches(record)
    return {
        "record": record_id, "identical": identical, "stored": stored, "recomputed": result.recomputed,
        "unchecked": result.unchecked, "explanation": record.explain(), "margin": margin,
    }


if __name__ == "__main__":  # ``python -m neurons.validator ...`` is ``dagnet validator ...``
    from neurons.cli import main

    main(["validator", *sys.argv[1:]])
