"""One validation step at a block: draw the task, query and run the miners, judge the
task with the validator's own reference, settle the step (docs/validator.md).

Each step:

1. syncs the metagraph at the block;
2. draws the step's task (:func:`~validator.sampling.draw_task`): the task,
   ``sha256(f"{hotkey}:{block}") mod len(tasks)`` over the active curated tasks and
   the families drawn for this tempo (when a drawn source is wired), its hidden
   instance's seed and its hint tier, which only this validator knows, and whether it
   goes out as a synthetic variant (at :data:`~validator.sampling.SYNTHETIC_RATE`);
3. runs :func:`~validator.validation.validation_step` on a sample of the serving miners
   (all of them in a small net): query, validate, execute, score;
4. meanwhile plans, runs and scores the same instance at the ``full`` tier with the
   validator's own reference (:mod:`validator.lifecycle`): a reference that does not
   succeed charges the task (set aside after :data:`~validator.state.SET_ASIDE_AFTER`
   such steps in a row; a drawn family is never set aside) and no miner; and runs it on
   the miners' package as their plans ran, for their margins (:mod:`validator.margins`);
5. settles the step in the state store, one transaction.

Before each step, set-aside tasks whose cool-off has ended by the block are made
active again, whether or not any task is active. A step that fails for a reason no
miner caused (the chain, an adapter, the reference run, the executor or the scorer
crashing) is an infrastructure failure: skipped, counted by cause, nobody charged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial

from engine.executor import ExecutorConfig
from engine.owned import OwnedLimits, OwnedRunnerFactory, metered
from engine.routing import routed
from protocol.metagraph import Peer
from protocol.synapse import TaskPackage
from protocol.task import Task
from subnets.forecast import with_forecast
from subnets.world import World, WorldSource

from .adapters import AdapterRunner, runs_external, tools_only, trusted_selector
from .chainview import ChainView
from .client import MinerClient
from .drawncache import DrawnCache
from .draws import DrawLimits, WorldRuns, cpu_s
from .feedback import FeedbackSender
from .judging import JudgingAllowance
from .lifecycle import InfrastructureFailure, Reference
from .loopconfig import LoopConfig
from .margins import DrawnStep, Forecasts, MinersRun, ReferenceRuns, drawn_step, reference_runs, step_credits
from .observation import StepLog, StepSummary
from .outcome import execution_record
from .providers import ProviderDirectory
from .sampling import TaskDraw, TaskSource, draw_task, sample_miners, source_of, step_digest, tempo_of
from .state import ACTIVE, LIFECYCLE_STATES, ReferenceRun, ValidatorState
from .validation import MinerOutcome, OwnedExecution, RunnerFactory, validation_step

log = logging.getLogger(__name__)


class Stepper:
    """Runs the validator's steps; :class:`~validator.loop.ValidatorLoop` says when."""

    def __init__(
        self,
        view: ChainView,
        state: ValidatorState,
        client: MinerClient,
        source: TaskSource,
        providers: ProviderDirectory | None,
        *,
        owned_runner: OwnedRunnerFactory | None,
        reference: Reference | None,
        drawn: DrawnCache | None,
        config: LoopConfig,
        executor_config: ExecutorConfig,
        steps: StepLog,
        worlds: WorldSource | None = None,
    ) -> None:
        self.view = view
        self.state = state
        self.client = client
        self.source = source
        self.providers = providers
        self.owned_runner = owned_runner
        self.reference = reference
        self.drawn = drawn
        self.worlds = worlds
        """Draws each tempo's hidden world, which every owned execution of that tempo plays
        (:func:`subnets.world.world_for`; ``None``: the advertised profile)."""
        self.config = config
        self.executor_config = executor_config
        self.steps = steps
        self.secret = state.instance_secret()  # then what the last step drew from
        self.forecasts = None if worlds is None else Forecasts(worlds)
        self.judging = JudgingAllowance()
        self.feedback = FeedbackSender(client)
        """Tells each queried miner how its own step went, in the background (:mod:`validator.feedback`)."""
        self._owned = (
            None
            if owned_runner is None
            else OwnedExecution(
                ThreadPoolExecutor(max_workers=max(1, config.exec_concurrency), thread_name_prefix="owned-execution")
            )
        )

    @property
    def hotkey(self) -> str:
        return self.view.chain.hotkey

    async def step(self, block: int) -> StepSummary | None:
        """One validation step at ``block``; never raises for a chain, miner or scorer failure."""
        started = time.perf_counter()
        try:
            self._reinstate(block)
            summary = await self._step(block)
        except InfrastructureFailure as exc:
            log.warning("step at block %s skipped, nobody charged: %s", block, exc)
            self.steps.failed(exc.cause)
            return None
        except Exception:
            log.exception("step at block %s failed, nobody charged", block)
            self.steps.failed("step")
            return None
        self.steps.ended(summary, started)
        return summary

    async def _step(self, block: int) -> StepSummary | None:
        tick, cpu = time.perf_counter(), cpu_s()
        snapshot = await self.view.sync(block)
        if snapshot is None:
            raise InfrastructureFailure("chain", "no metagraph has been read yet")
        wanted = self.reference is not None or self.drawn is not None or self.worlds is not None
        tempo_blocks = await self.view.tempo() if wanted else None  # a length in blocks
        tempo = None if tempo_blocks is None else tempo_of(block, tempo_blocks)  # the tempo's number
        self.secret = self.state.step_secret(block, tempo_blocks)
        families = await self._drawn_tasks(tempo)
        active = [*self._active_tasks(), *families]
        if not active:
            log.warning("no active task at block %s: nothing to send", block)
            return None
        if self.providers is not None:
            try:
                await self.providers.refresh({subnet for task in active for subnet in task.available_tools})
            except Exception as exc:
                raise InfrastructureFailure("adapter", f"providers: {type(exc).__name__}: {exc}") from exc
        self.view.metrics.phase.labels("sync").observe(time.perf_counter() - tick)

        draw = draw_task(
            self.hotkey,
            self.secret,
            block,
            active,
            synthetic_rate=self.config.synthetic_rate,
            tier_shares=self.config.tier_shares,
            drawn=dict.fromkeys((t.task_id for t in families), tempo),
        )
        base = draw.base
        task = self._sent(draw, block)
        world = None if self.worlds is None or tempo is None else self.worlds(self.secret, tempo, task.available_tools)
        told = await self._told(world, task)
        task = told(task)
        digest = int.from_bytes(step_digest(self.hotkey, block), "big")
        neurons = sample_miners(snapshot, self.config.sample_size, digest, self_hotkey=self.hotkey)
        miners = [Peer.from_neuron(n) for n in neurons]
        if not miners:
            log.info("no serving miner at block %s", block)
            return None

        full = task if draw.tier == "full" else told(self._sent(replace(draw, tier="full"), block))
        reference = asyncio.ensure_future(self._references(task, full, world, len(miners)))  # beside the miners
        bounds = self.config.step_bounds
        until = None if bounds is None else time.monotonic() + bounds.deadline_s  # no later than the step's own
        try:
            result = await validation_step(
                task=task,
                miners=miners,
                client=self.client,
                runner_factory=self._runner_factory(task, world),
                executor_config=self.executor_config,
                exec_concurrency=self.config.exec_concurrency,
                owned=None if self._external(task) else self._owned,
                bounds=bounds,
                judging=self.judging.for_step(block, tempo),
            )
        except BaseException:
            reference.cancel()
            raise
        runs = await reference
        failure = runs.failure
        self.steps.observe(result, task)

        curated = draw.drawn_tempo is None  # a drawn family is never set aside: it is gone next tempo
        judged = None if self.reference is None or not curated else ReferenceRun(base.task_id, failure)
        if failure is not None:  # the task is broken on this instance: it is charged, no miner is
            self.state.settle_step(block, [], judged, tempo=tempo_blocks)
            self._log_reference_failure(block, base.task_id, failure, curated=curated)
            return None
        self.steps.explain(result, block, draw.tier)
        charged = [outcome for outcome in result.outcomes if outcome.charged]
        limits = DrawLimits.for_step(cpu_s() - cpu, until)
        drawn = await self._drawn(task, world, charged, runs, limits, len(miners))
        tick = time.perf_counter()  # the record phase
        margins = step_credits(charged, drawn.reference_s, drawn.miners)
        records = [
            execution_record(
                block,
                task,
                draw,
                outcome,
                world,
                drawn.reference_s,
                margins.get(outcome.uid),
                draws=drawn.draws,
                drawn_s=drawn.miners.get(outcome.uid),
            )
            for outcome in charged
        ]
        self.state.settle_step(block, records, judged, tempo=tempo_blocks)
        self.feedback.send(result, task, miners, block=block, tempo=tempo)
        self.view.metrics.phase.labels("record").observe(time.perf_counter() - tick)
        self.view.metrics.standing(self.state.standing())
        log.info(
            "block %s: task %s (%s, %s tier) scored %d miners in %.2fs; reference S=%s (%d draw(s) of the world%s)",
            block,
            task.task_id,
            base.task_id,
            draw.tier,
            len(records),
            result.timings.wall_s,
            "none (no margin this step)" if drawn.reference_s is None else f"{drawn.reference_s:.3f}",
            drawn.draws,
            "" if drawn.stopped in (None, "most") else f", stopped by {drawn.stopped}",
        )
        return StepSummary(block, task.task_id, base.task_id, result.scores(), result.timings.wall_s)

    def _sent(self, draw: TaskDraw, block: int) -> Task:
        """The task ``draw`` sends at ``block``, its instance drawn by the source it came from."""
        drawn = None if self.drawn is None else self.drawn.source
        return draw.task(source_of(draw.drawn_tempo, self.source, drawn, self.secret).instance).model_copy(
            update={"send_block": block}
        )

    async def _told(self, world: World | None, task: Task) -> Callable[[Task], Task]:
        """What adds the forecast of ``world``'s tempo (the one its reference plans on) to a
        task of the step, as every miner is sent it (:mod:`protocol.forecast`); in a worker
        thread, since the first step of a tempo draws the published worlds."""
        if world is None or self.forecasts is None:
            return lambda sent: sent
        prior = await asyncio.to_thread(self.forecasts, self.secret, world, task.available_tools)
        return lambda sent: with_forecast(sent, prior, self.hotkey)

    async def _drawn_tasks(self, tempo: int | None) -> Sequence[Task]:
        """The families drawn for tempo number ``tempo`` (none without a drawn source or a
        tempo), drawn and checked in a worker thread the first time a tempo asks."""
        if self.drawn is None or tempo is None:
            return ()
        source = await asyncio.to_thread(self.drawn.source, self.secret, tempo)
        return source.tasks()

    def _external(self, task: Task) -> bool:
        """Whether ``task``'s plans run through the adapters, on the wall clock."""
        return self.owned_runner is None or runs_external(self.providers, list(task.available_tools))

    def _owned_runner(self, world: World | None) -> OwnedRunnerFactory | None:
        """The validator's own runner for plans, in the tempo's ``world`` (``None``: none)."""
        factory = self.owned_runner
        return factory if world is None or factory is None else partial(factory, world=world)

    def _runner_factory(self, task: Task, world: World | None) -> RunnerFactory:
        """Who runs a miner's plan: the validator itself (in the tempo's ``world``), or its
        adapters beside it."""
        owned_runner = self._owned_runner(world)
        if not self._external(task):
            assert owned_runner is not None
            return lambda package, miner: owned_runner(task)
        providers, own = self.providers, self.view.snapshot
        assert providers is not None
        local = None if owned_runner is None else owned_runner(task)
        rerun = None if owned_runner is None else owned_runner(tools_only(task))
        limits = OwnedLimits() if self._owned is None else self._owned.limits

        def build(package: TaskPackage, miner: Peer) -> AdapterRunner:
            neuron = None if own is None else own.by_hotkey(miner.hotkey)
            select = trusted_selector(providers, miner, miner_coldkey=neuron.coldkey if neuron else "", own=own)
            return AdapterRunner(  # each plan's owned work and re-runs bounded as owned execution bounds a plan
                self.client,
                select,
                package,
                serves=providers.serves,
                local=None if local is None else metered(routed(local, package.route), limits),
                rerun=None if rerun is None else metered(rerun, limits),
            )

        return build

    def _active_tasks(self) -> list[Task]:
        tasks = self.source.tasks()
        states = self.state.task_states([t.task_id for t in tasks])
        self.view.metrics.task_states(states, LIFECYCLE_STATES)
        return [t for t in tasks if states.get(t.task_id) == ACTIVE]

    def _reinstate(self, block: int) -> None:
        for task_id in self.state.reinstate(block):
            log.warning("task %s is active again at block %s: its cool-off has ended", task_id, block)

    async def _references(self, task: Task, full: Task, world: World | None, miners: int) -> ReferenceRuns:
        """:func:`validator.margins.reference_runs` for the step, in a worker thread."""
        if self.reference is None:
            return ReferenceRuns(None)
        tick = time.perf_counter()
        try:
            run = self._miners_run(task, world, miners)
            return await asyncio.to_thread(reference_runs, self.reference, task, full, run, config=self.executor_config)
        finally:
            self.view.metrics.phase.labels("reference").observe(time.perf_counter() - tick)

    async def _drawn(
        self,
        task: Task,
        world: World | None,
        outcomes: Sequence[MinerOutcome],
        reference: ReferenceRuns,
        limits: DrawLimits,
        miners: int,
    ) -> DrawnStep:
        """:func:`validator.margins.drawn_step` in a worker thread, in the hidden ``world``
        (``miners``: how many the step asked, for one plan's share of the work)."""
        run = None if world is None or world.is_advertised else self._miners_run(task, world, miners)
        runs = None
        if run is not None and self.owned_runner is not None and world is not None:
            runs = WorldRuns(task, world, self.owned_runner, run.config, run.owned, run.cores, limits.until)
        tick = time.perf_counter()
        drawn = await asyncio.to_thread(drawn_step, runs, outcomes, reference, limits)
        if runs is not None:
            self.view.metrics.phase.labels("draws").observe(time.perf_counter() - tick)
            self.view.metrics.draws.observe(drawn.draws)
        return drawn

    def _miners_run(self, task: Task, world: World | None, miners: int) -> MinersRun | None:
        """How the step's plans run, for the reference to run the same way (``None``: on adapters)."""
        runner, owned, bounds = self._owned_runner(world), self._owned, self.config.step_bounds
        if self._external(task) or runner is None or owned is None:
            return None
        prior = (
            None
            if world is None or self.forecasts is None
            else partial(self.forecasts, self.secret, world, task.available_tools)
        )
        return MinersRun(
            runner,
            self.executor_config,
            owned.limits if bounds is None else bounds.share(owned.limits, miners),
            owned.cores,
            prior=prior,
        )

    def _log_reference_failure(self, block: int, task_id: str, failure: str, *, curated: bool) -> None:
        if not curated:
            log.warning("block %s: drawn family %s's reference failed, nobody charged: %s", block, task_id, failure)
            return
        lifecycle = self.state.task_lifecycles()[task_id]
        if lifecycle.state == ACTIVE:
            log.warning(
                "block %s: task %s's reference failed (%d in a row), no miner charged: %s",
                block,
                task_id,
                lifecycle.reference_failures,
                failure,
            )
        else:
            log.warning(
                "task %s set aside at block %s until block %s: %s", task_id, block, lifecycle.until_block, failure
            )
