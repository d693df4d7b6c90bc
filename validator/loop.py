"""The validator's long-running loop: one validation step per new block, weights once per tempo.

Each step:

1. syncs the metagraph at the chain head;
2. draws the step's task (:func:`~validator.sampling.draw_task`): the task,
   ``sha256(f"{hotkey}:{block}") mod len(tasks)`` over the active curated tasks and
   the families drawn for this tempo (when a drawn source is wired), its hidden
   instance's seed and its hint tier, which only this validator knows, and whether it
   goes out as a synthetic variant (at :data:`~validator.sampling.SYNTHETIC_RATE`);
3. runs :func:`~validator.step.validation_step` on a sample of the serving miners
   (all of them in a small net): query, validate, execute, score;
4. meanwhile plans, runs and scores the same instance at the ``full`` tier with the
   validator's own reference (:mod:`validator.lifecycle`): a reference that does not
   succeed charges the task (set aside after :data:`~validator.state.SET_ASIDE_AFTER`
   such steps in a row; a drawn family is never set aside) and no miner;
5. settles the step in the state store, one transaction.

Before each step, set-aside tasks whose cool-off has ended by the block are made
active again, whether or not any task is active. A step that fails for a reason no
miner caused (the chain, an adapter, the reference run, the executor or the scorer
crashing) is an infrastructure failure: skipped, counted by cause, nobody charged.

Weights have a task of their own, beside the steps: at every new head and after
every step, when at least ``max(tempo, weights_rate_limit)`` blocks have passed
since weights were last accepted, it sets weights from the windowed scores, so a
step held by slow miners delays no weight-set. A refusal is logged with the chain's
reason and tried again at the next head; setting weights and recording them run to
their end together. Nothing a chain, a miner or a scorer does ends the loop: a
failed step is logged and counted, and the loop waits for the next block.
"""

from __future__ import annotations

import asyncio
from collections import deque
from concurrent.futures import ThreadPoolExecutor
import logging
import time
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from chain.base import Chain, Hyperparameters
from chain.network import ChainUnreachable, OutageWarner
from protocol.hints import HintTier
from protocol.metagraph import MetagraphSnapshot, Peer
from protocol.synapse import SCORING_VERSION, TaskPackage
from protocol.task import Task
from scoring.weights import normalize_weights, warmup_scale

from .client import MinerClient
from .errors import PeerTimeout
from .feedback import FeedbackSender
from .judging import JudgingAllowance
from engine.executor import ExecutorConfig
from .prometheus import ValidatorMetrics
from .providers import ProviderDirectory
from .adapters import AdapterRunner, runs_external, tools_only, trusted_selector
from .sampling import (
    DEFAULT_TIER_SHARES, SYNTHETIC_RATE, DrawnFamilies, TaskDraw, TaskSource, draw_task, sample_miners, source_of,
    step_digest, tempo_of,
)
from .lifecycle import InfrastructureFailure, Reference, no_sandbox, reference_failure
from .state import ACTIVE, LIFECYCLE_STATES, ExecutionRecord, ReferenceRun, ValidatorState
from engine.owned import OwnedLimits, OwnedRunnerFactory, metered
from engine.routing import routed
from .step import MinerOutcome, OwnedExecution, RunnerFactory, StepBounds, StepResult, validation_step

log = logging.getLogger(__name__)
T = TypeVar("T")

SETTLED, IDLE, INFRASTRUCTURE = "settled", "idle", "infrastructure"
STEP_OUTCOMES = (SETTLED, IDLE, INFRASTRUCTURE)
"""How a step ends: scored and settled; nothing scored (no active task, no serving
miner, or the task's reference failed on the instance, which charges the task); or
failed for a reason no miner caused (the chain, an adapter, the reference run, a
scorer or executor crash), which charges no miner and no task. A head read that
fails is recorded as an infrastructure failure too: no step could run."""
STEP_HISTORY = 32
MAX_BACKOFF_S = 30.0
"""The longest wait between two looks at a chain head that does not answer."""
"""How many recent step outcomes the loop keeps for ``/health``."""


@dataclass(frozen=True, slots=True)
class LoopConfig:
    sample_size: int = 256
    """Miners queried per step; a subnet with fewer serving miners is queried whole."""
    exec_concurrency: int = 16
    version_key: int = SCORING_VERSION
    poll_s: float = 1.0
    """How often the loop asks for the chain head while it waits for a new block."""
    synthetic_rate: float = SYNTHETIC_RATE
    tier_shares: Mapping[HintTier, float] = field(default_factory=lambda: dict(DEFAULT_TIER_SHARES))
    """The share of steps sent at each hint tier (:func:`~validator.sampling.draw_tier`)."""
    warmup_full_at: int = 20
    step_bounds: StepBounds | None = None
    """Each step's shared work and deadline (:class:`~validator.step.StepBounds`); ``None``: unbounded."""


@dataclass(frozen=True, slots=True)
class StepSummary:
    """What a settled step did, for logs and live views."""

    block: int
    task_id: str
    base_task_id: str
    scores: dict[int, float]
    wall_s: float


class ValidatorLoop:
    def __init__(
        self,
        chain: Chain,
        state: ValidatorState,
        client: MinerClient,
        source: TaskSource,
        providers: ProviderDirectory | None = None,
        *,
        owned_runner: OwnedRunnerFactory | None = None,
        reference: Reference | None = None,
        drawn: DrawnFamilies | None = None,
        config: LoopConfig = LoopConfig(),
        executor_config: ExecutorConfig = ExecutorConfig(),
        metrics: ValidatorMetrics | None = None,
    ) -> None:
        """Plans run on ``owned_runner`` (the validator's own execution, simulated time);
        a task one of whose subnets ``providers`` serve (the operator's dagnet adapters)
        runs on the wall clock, those subnets' nodes going to the providers under the
        trust rules of :mod:`validator.adapters`. At least one of the two is required.
        ``reference`` judges each step's task (:mod:`validator.lifecycle`); without it
        no task is ever set aside. ``drawn`` gives the families drawn per tempo, offered
        besides the curated ones (``None``: curated only)."""
        if providers is None and owned_runner is None:
            raise ValueError("give the loop owned_runner (owned execution), providers (external), or both")
        self.chain = chain
        self.state = state
        self.client = client
        self.source = source
        self.providers = providers
        self.owned_runner = owned_runner
        self.reference = reference
        self.drawn = drawn
        self._drawn_cache: tuple[int, TaskSource] | None = None
        self._owned = None if owned_runner is None else OwnedExecution(
            ThreadPoolExecutor(max_workers=max(1, config.exec_concurrency), thread_name_prefix="owned-execution")
        )
        self.config = config
        self.executor_config = executor_config
        self.judging = JudgingAllowance()
        self.feedback = FeedbackSender(client)
        """Tells each queried miner how its own step went, in the background (:mod:`validator.feedback`)."""
        self.metrics = metrics or ValidatorMetrics()
        self.metrics.version_key.set(config.version_key)
        self.metrics.last_weights_block.set(state.last_weights_block() or 0)
        self._secret = state.instance_secret()
        self._snapshot: MetagraphSnapshot | None = None
        self._hyper: Hyperparameters | None = None
        self._attempted: int | None = None
        self.last_step: StepSummary | None = None
        self._outage = OutageWarner(log)
        self.step_outcomes: deque[str] = deque(maxlen=STEP_HISTORY)
        """How each recent step ended, newest last: one of :data:`STEP_OUTCOMES`."""

    @property
    def snapshot(self) -> MetagraphSnapshot | None:
        """The last metagraph read, or ``None`` before the first read."""
        return self._snapshot

    @property
    def hyperparameters(self) -> Hyperparameters | None:
        """The subnet's hyperparameters as last read, or ``None`` before the first read."""
        return self._hyper

    @property
    def hotkey(self) -> str:
        return self.chain.hotkey

    async def run(self, stop: asyncio.Event) -> None:
        """Step at every new block, and set weights when they are due, until ``stop`` is set.

        The weights have a task of their own: a due weight-set never waits for a step."""
        settled = asyncio.Event()
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self._set_weights_when_due(stop, settled), name="weights")
            while not stop.is_set():
                block = await self._next_block(stop)
                if block is None:
                    break
                await self.step(block)
                settled.set()

    async def _next_block(self, stop: asyncio.Event) -> int | None:
        """The chain head once it is past the last step settled or tried (a step that
        settled nothing is not tried again at the same block); ``None`` when stopped."""
        failures = 0
        while not stop.is_set():
            block = await self._head()
            if block is None:
                self._infrastructure("chain")
                failures += 1
            else:
                failures = 0
                done = [b for b in (self.state.last_step_block(), self._attempted) if b is not None]
                if not done or block > max(done):
                    self._attempted = block
                    return block
            await _first_of(self._poll_wait(failures), stop)
        return None

    async def _head(self) -> int | None:
        """The chain head, or ``None`` when the chain does not answer (counted and logged)."""
        try:
            block = await self.chain.block()
        except Exception as exc:
            self._chain_error("block", exc)
            return None
        self._outage.recovered()
        return block

    def _poll_wait(self, failures: int) -> float:
        """How long to wait before the next look at the head: longer while the chain does not answer."""
        return min(MAX_BACKOFF_S, self.config.poll_s * 2 ** min(failures, 8))

    async def step(self, block: int) -> StepSummary | None:
        """One validation step at ``block``; never raises for a chain, miner or scorer failure."""
        started = time.perf_counter()
        try:
            self._reinstate(block)
            summary = await self._step(block)
        except InfrastructureFailure as exc:
            log.warning("step at block %s skipped, nobody charged: %s", block, exc)
            self.metrics.steps.labels("error").inc()
            self._infrastructure(exc.cause)
            return None
        except Exception:
            log.exception("step at block %s failed, nobody charged", block)
            self.metrics.steps.labels("error").inc()
            self._infrastructure("step")
            return None
        self.metrics.phase.labels("step").observe(time.perf_counter() - started)
        if summary is not None:
            self.metrics.steps.labels("settled").inc()
            self.last_step = summary
        self.step_outcomes.append(SETTLED if summary is not None else IDLE)
        return summary

    async def _step(self, block: int) -> StepSummary | None:
        tick = time.perf_counter()
        snapshot = await self._sync(block)
        if snapshot is None:
            raise InfrastructureFailure("chain", "no metagraph has been read yet")
        tempo = None if self.reference is None and self.drawn is None else await self._tempo()
        drawn = await self._drawn_tasks(block, tempo)
        active = [*self._active_tasks(), *drawn]
        if not active:
            log.warning("no active task at block %s: nothing to send", block)
            return None
        if self.providers is not None:
            try:
                await self.providers.refresh(_partner_subnets(active))
            except Exception as exc:
                raise InfrastructureFailure("adapter", f"providers: {type(exc).__name__}: {exc}") from exc
        self.metrics.phase.labels("sync").observe(time.perf_counter() - tick)

        draw = draw_task(
            self.hotkey, self._secret, block, active, synthetic_rate=self.config.synthetic_rate,
            tier_shares=self.config.tier_shares,
            drawn=dict.fromkeys((t.task_id for t in drawn), None if tempo is None else tempo_of(block, tempo)),
        )
        base = draw.base
        task = self._sent(draw, block)
        digest = int.from_bytes(step_digest(self.hotkey, block), "big")
        neurons = sample_miners(snapshot, self.config.sample_size, digest, self_hotkey=self.hotkey)
        miners = [Peer.from_neuron(n) for n in neurons]
        if not miners:
            log.info("no serving miner at block %s", block)
            return None

        full = task if draw.tier == "full" else self._sent(replace(draw, tier="full"), block)
        reference = asyncio.ensure_future(self._reference_failure(full))  # beside the miners, in a thread
        try:
            result = await validation_step(
                task=task, miners=miners, client=self.client, runner_factory=self._runner_factory(task),
                executor_config=self.executor_config, exec_concurrency=self.config.exec_concurrency,
                owned=None if self._external(task) else self._owned, bounds=self.config.step_bounds,
                judging=self.judging.for_period(block if tempo is None else tempo_of(block, tempo)),
            )
        except BaseException:
            reference.cancel()
            raise
        failure = await reference
        self._observe_step(result, task)

        tick = time.perf_counter()
        curated = draw.drawn_tempo is None  # a drawn family is never set aside: it is gone next tempo
        judged = None if self.reference is None or not curated else ReferenceRun(base.task_id, failure)
        if failure is not None:  # the task is broken on this instance: it is charged, no miner is
            self.state.settle_step(block, [], judged, tempo=tempo)
            self._log_reference_failure(block, base.task_id, failure, curated=curated)
            return None
        records = [execution_record(block, task, draw, outcome) for outcome in result.outcomes]
        self.state.settle_step(block, records, judged, tempo=tempo)
        self.feedback.send(result, task, miners, block=block, tempo=None if tempo is None else tempo_of(block, tempo))
        self.metrics.phase.labels("record").observe(time.perf_counter() - tick)
        self.metrics.scores(self.state.window().means())
        log.info(
            "block %s: task %s (%s, %s tier) scored %d miners in %.2fs",
            block, task.task_id, base.task_id, draw.tier, len(records), result.timings.wall_s,
        )
        return StepSummary(block, task.task_id, base.task_id, result.scores(), result.timings.wall_s)

    def _sent(self, draw: TaskDraw, block: int) -> Task:
        """The task ``draw`` sends at ``block``, its instance drawn by the source it came from."""
        source = source_of(draw.drawn_tempo, self.source, None if self.drawn is None else self._drawn_for, self._secret)
        return draw.task(source.instance).model_copy(update={"send_block": block})

    async def _drawn_tasks(self, block: int, tempo: int | None) -> Sequence[Task]:
        """The families drawn for ``block``'s tempo (none without a drawn source), drawn
        and checked in a worker thread the first time a tempo asks."""
        if self.drawn is None or tempo is None:
            return ()
        source = await asyncio.to_thread(self._drawn_for, self._secret, tempo_of(block, tempo))
        return source.tasks()

    def _drawn_for(self, secret: int, index: int) -> TaskSource:
        """The families drawn for tempo ``index``, kept until the next tempo."""
        assert self.drawn is not None
        if self._drawn_cache is None or self._drawn_cache[0] != index:
            tick = time.perf_counter()
            self._drawn_cache = (index, self.drawn(secret, index))
            log.info("tempo %s: %d families drawn in %.2fs", index, len(self._drawn_cache[1].tasks()),
                     time.perf_counter() - tick)
        return self._drawn_cache[1]

    def _external(self, task: Task) -> bool:
        """Whether ``task``'s plans run through the adapters, on the wall clock."""
        return self.owned_runner is None or runs_external(self.providers, list(task.available_tools))

    def _runner_factory(self, task: Task) -> RunnerFactory:
        """Who runs a miner's plan: the validator itself, or its adapters beside it."""
        owned_runner = self.owned_runner
        if not self._external(task):
            assert owned_runner is not None
            return lambda package, miner: owned_runner(task)
        providers, own = self.providers, self._snapshot
        assert providers is not None
        local = None if owned_runner is None else owned_runner(task)
        rerun = None if owned_runner is None else owned_runner(tools_only(task))
        limits = OwnedLimits() if self._owned is None else self._owned.limits

        def build(package: TaskPackage, miner: Peer) -> AdapterRunner:
            neuron = None if own is None else own.by_hotkey(miner.hotkey)
            select = trusted_selector(providers, miner, miner_coldkey=neuron.coldkey if neuron else "", own=own)
            return AdapterRunner(  # each plan's owned work and re-runs bounded as owned execution bounds a plan
                self.client, select, package, serves=providers.serves,
                local=None if local is None else metered(routed(local, package.route), limits),
                rerun=None if rerun is None else metered(rerun, limits),
            )

        return build

    async def _sync(self, block: int) -> MetagraphSnapshot | None:
        """The metagraph at ``block``, or the last one read when the chain cannot answer."""
        try:
            self._snapshot = await self.chain.metagraph(block)
        except Exception as exc:
            self._chain_error("metagraph", exc)
            if self._snapshot is None:
                return None
            log.warning("using the metagraph of block %s", self._snapshot.block)
        else:
            self.metrics.synced(self._snapshot)
        return self._snapshot

    def _active_tasks(self) -> list[Task]:
        tasks = self.source.tasks()
        states = self.state.task_states([t.task_id for t in tasks])
        self.metrics.task_states(states, LIFECYCLE_STATES)
        return [t for t in tasks if states.get(t.task_id) == ACTIVE]

    # -- task lifecycle and infrastructure failures -----------------------------------

    def _reinstate(self, block: int) -> None:
        for task_id in self.state.reinstate(block):
            log.warning("task %s is active again at block %s: its cool-off has ended", task_id, block)

    async def _reference_failure(self, task: Task) -> str | None:
        """Why the reference did not succeed on ``task``, run in a worker thread;
        ``None`` when it did or when there is no reference."""
        if self.reference is None:
            return None
        tick = time.perf_counter()
        try:
            return await asyncio.to_thread(reference_failure, self.reference, task, config=self.executor_config)
        finally:
            self.metrics.phase.labels("reference").observe(time.perf_counter() - tick)

    def _log_reference_failure(self, block: int, task_id: str, failure: str, *, curated: bool) -> None:
        if not curated:
            log.warning("block %s: drawn family %s's reference failed, nobody charged: %s", block, task_id, failure)
            return
        lifecycle = self.state.task_lifecycles()[task_id]
        if lifecycle.state == ACTIVE:
            log.warning(
                "block %s: task %s's reference failed (%d in a row), no miner charged: %s",
                block, task_id, lifecycle.reference_failures, failure,
            )
        else:
            log.warning("task %s set aside at block %s until block %s: %s", task_id, block, lifecycle.until_block, failure)

    async def _tempo(self) -> int:
        """The subnet's tempo, read from the chain the first time."""
        hyper = self._hyper or await self._hyperparameters()
        if hyper is None:
            raise InfrastructureFailure("chain", "the subnet's hyperparameters cannot be read")
        return hyper.tempo

    def _infrastructure(self, cause: str) -> None:
        """A step (or a head read) lost to a cause no miner or task had: counted, charged to nobody."""
        self.metrics.infrastructure_failures.labels(cause).inc()
        self.step_outcomes.append(INFRASTRUCTURE)

    # -- weights --------------------------------------------------------------------

    async def _set_weights_when_due(self, stop: asyncio.Event, settled: asyncio.Event) -> None:
        """The weights' own task: at every new head, and after every step (``settled``),
        set weights if they are due. Nothing a chain or the state does ends it."""
        checked: int | None = None
        failures = 0
        while not stop.is_set():
            block = await self._head()
            failures = 0 if block is not None else failures + 1
            if block is not None and (block != checked or settled.is_set()):
                settled.clear()
                checked = block
                try:
                    await self.maybe_set_weights(block)
                except Exception:
                    log.exception("setting weights at block %s failed", block)
                    self.metrics.weights_set.labels("error").inc()
            await _first_of(self._poll_wait(failures), stop, *(() if failures else (settled,)))

    async def maybe_set_weights(self, block: int) -> bool:
        """Set weights if a tempo (and the rate limit) has passed since the last accepted set."""
        hyper = await self._hyperparameters()
        if hyper is None:
            return False
        last = self.state.last_weights_block()
        if last is not None and block - last < max(hyper.tempo, hyper.weights_rate_limit):
            return False
        return await self.set_weights(block, hyper)

    async def set_weights(self, block: int, hyper: Hyperparameters) -> bool:
        weights = self.weights(block, hyper.immunity_period)
        if not weights:
            log.info("no miner has a positive score yet: no weights to set")
            self.metrics.weights_set.labels("nothing_to_set").inc()
            return False
        return await _to_the_end(self._submit(block, weights))

    async def _submit(self, block: int, weights: dict[int, float]) -> bool:
        """Send ``weights`` to the chain and record what it accepted: one unit, run to its
        end by :func:`_to_the_end` even when the validator is stopped meanwhile."""
        tick = time.perf_counter()
        uids = sorted(weights)
        try:
            result = await self.chain.set_weights(uids, [weights[uid] for uid in uids], self.config.version_key)
        except Exception as exc:
            self._chain_error("set_weights", exc)
            self.metrics.weights_set.labels("error").inc()
            return False
        self.metrics.phase.labels("weights").observe(time.perf_counter() - tick)
        if not result.success:
            log.warning("set_weights refused at block %s: %s", block, result.message)
            self.metrics.weights_set.labels("refused").inc()
            return False
        accepted = result.block if result.block is not None else block
        self.state.weights_accepted(accepted, weights)
        self.metrics.weights_set.labels("success").inc()
        self.metrics.last_weights_block.set(accepted)
        self.metrics.weights(weights)
        log.info("weights set at block %s for %d miners", accepted, len(weights))
        return True

    def weights(self, block: int, immunity_period: int) -> dict[int, float]:
        """Weights from the windowed means of the miners now on the metagraph.

        A window counts only for the hotkey that earned it; a miner still in
        immunity is scaled by ``min(1, tasks_seen / warmup_full_at)``.
        """
        if self._snapshot is None:
            return {}
        standing = self.state.standing()  # one read: a step settling meanwhile is in it whole or not at all
        window, seen, owners = standing.window, standing.tasks_seen, standing.hotkeys
        scores = {}
        for neuron in self._snapshot.neurons:
            if owners.get(neuron.uid) != neuron.hotkey:
                continue
            registered = neuron.registered_block
            in_immunity = registered is not None and block - registered < immunity_period
            scale = warmup_scale(seen.get(neuron.uid, 0), in_immunity, self.config.warmup_full_at)
            scores[neuron.uid] = window.mean(neuron.uid) * scale
        return normalize_weights(scores)

    async def _hyperparameters(self) -> Hyperparameters | None:
        try:
            self._hyper = await self.chain.hyperparameters()
        except Exception as exc:
            self._chain_error("hyperparameters", exc)
        else:
            self.metrics.tempo.set(self._hyper.tempo)
        return self._hyper

    def _chain_error(self, call: str, exc: Exception) -> None:
        """Count a failed chain call; an unreachable chain is logged once a minute (it names
        the endpoint and the cause), anything else each time."""
        self.metrics.chain_errors.labels(call).inc()
        if isinstance(exc, ChainUnreachable):
            self._outage.failed(exc, f"the validator's {call} call")
        else:
            log.warning("chain %s failed: %s", call, exc)

    # -- metrics --------------------------------------------------------------------

    def _observe_step(self, result: StepResult, task: Task) -> None:
        m = self.metrics
        m.phase.labels("query").observe(result.timings.query_s)
        m.phase.labels("execute").observe(result.timings.execute_s)
        m.phase.labels("score").observe(result.timings.score_s)
        for outcome in result.outcomes:
            _observe_outcome(m, outcome, task)


def _observe_outcome(m: ValidatorMetrics, outcome: MinerOutcome, task: Task) -> None:
    execution = outcome.execution
    m.execution_score.labels(task.hint_tier).observe(outcome.score.S)
    if execution is None:
        m.executions.labels("not_run", task.hint_tier).inc()
        if isinstance(outcome.failure, PeerTimeout):
            m.timeouts.labels("query").inc()
        return
    m.executions.labels(execution.status, task.hint_tier).inc()
    if execution.status == "budget_abort":
        m.budget_aborts.inc()
    m.cost.observe(execution.metrics.cost_tao)
    m.timeouts.labels("node").inc(execution.metrics.timeouts)
    subnets = {node["id"]: node.get("subnet", "") for node in (outcome.plan or {}).get("nodes", [])}
    for node_id, node in execution.nodes.items():
        if node.started_s is not None and node.finished_s is not None:
            m.node_latency.labels(subnets.get(node_id, "unknown")).observe(node.finished_s - node.started_s)
    if task.task_type == "code":
        m.sandbox_runs.labels(_sandbox_outcome(outcome)).inc()


def _sandbox_outcome(outcome: MinerOutcome) -> str:
    quality = outcome.score.details.get("quality", {})
    if "isolation" in quality:
        return "ran"
    return "unavailable" if no_sandbox(outcome.score) else "not_run"


async def _first_of(timeout_s: float, *events: asyncio.Event) -> None:
    """Wait until one of ``events`` is set, or ``timeout_s`` has passed."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


async def _to_the_end(unit: Awaitable[T]) -> T:
    """``unit``'s result, awaited to its end even when the caller is cancelled meanwhile
    (the cancellation is raised after it): the validator never stops between two
    things that must happen together, such as setting weights and recording them."""
    task = asyncio.ensure_future(unit)
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                raise
            cancelled = True
        else:
            break
    if cancelled:
        raise asyncio.CancelledError
    return result


def _partner_subnets(tasks: Sequence[Task]) -> set[str]:
    return {subnet for task in tasks for subnet in task.available_tools}


def execution_record(block: int, task: Task, draw: TaskDraw, outcome: MinerOutcome) -> ExecutionRecord:
    """What the state keeps of one miner's part in the step at ``block``: ``task`` as
    sent, and the ``draw`` it came from, to rebuild it (:mod:`validator.audit`)."""
    execution = outcome.execution
    return ExecutionRecord(
        block=block, uid=outcome.uid, hotkey=outcome.hotkey, task_id=task.task_id, base_task_id=draw.base.task_id,
        instance_seed=draw.seed, synthetic=draw.synthetic, hint_tier=draw.tier, drawn_tempo=draw.drawn_tempo,
        plan=outcome.plan, metrics=outcome.summary(),
        final_output=None if execution is None else execution.final_output,
        score=outcome.score.model_dump(mode="json"), reason=outcome.reason,
    )
