"""The validator's long-running loop: one validation step per new block, weights once per tempo.

:meth:`ValidatorLoop.run` runs two tasks until it is stopped:

- **steps** (:mod:`validator.stepper`): at every block past the last step settled or
  tried, one validation step;
- **weights** (:mod:`validator.weights`): at every new head, and after every step,
  when at least ``max(tempo, weights_rate_limit)`` blocks have passed since weights
  were last accepted, weights from the windowed scores. A step held by slow miners
  delays no weight-set; a refusal is logged with the chain's reason and tried again
  at the next head; setting weights and recording them run to their end together.

Both read the chain through one :class:`~validator.chainview.ChainView` and report
through one :class:`~validator.observation.StepLog`. Nothing a chain, a miner or a
scorer does ends the loop: a failed step is logged and counted, a head that cannot be
read is asked for again, less often while the chain does not answer.
"""

from __future__ import annotations

import asyncio
import logging

from chain.base import Chain, Hyperparameters
from engine.executor import ExecutorConfig
from engine.owned import OwnedRunnerFactory
from protocol.metagraph import MetagraphSnapshot
from subnets.world import World, WorldSource

from .chainview import ChainView
from .client import MinerClient
from .drawncache import DrawnCache
from .feedback import FeedbackSender
from .lifecycle import Reference
from .loopconfig import LoopConfig
from .observation import StepLog, StepSummary
from .prometheus import ValidatorMetrics
from .providers import ProviderDirectory
from .sampling import DrawnFamilies, TaskSource, tempo_of
from .state import ValidatorState
from .stepper import Stepper
from .weights import WeightSetter

__all__ = ["LoopConfig", "StepSummary", "TaskSource", "ValidatorLoop", "WorldNotOver", "WorldNotPlayed"]

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 30.0
"""The longest wait between two looks at a chain head that does not answer."""


class WorldNotOver(LookupError):
    """A tempo's world was asked for before the tempo ended."""


class WorldNotPlayed(LookupError):
    """A tempo's world was asked for that this validator did not play (or no longer keeps a step of)."""


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
        worlds: WorldSource | None = None,
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
        besides the curated ones (``None``: curated only). ``worlds`` draws each tempo's
        hidden world from the secret (:func:`subnets.world.world_for`), which every owned
        execution of that tempo plays (``None``: the advertised profile)."""
        if providers is None and owned_runner is None:
            raise ValueError("give the loop owned_runner (owned execution), providers (external), or both")
        self.chain = chain
        self.state = state
        self.source = source
        self.config = config
        self.metrics = metrics or ValidatorMetrics()
        self.metrics.version_key.set(config.version_key)
        self.metrics.last_weights_block.set(state.last_weights_block() or 0)
        self.view = ChainView(chain, self.metrics, version_key=config.version_key)
        self.steps = StepLog(self.metrics)
        self.stepper = Stepper(
            self.view,
            state,
            client,
            source,
            providers,
            owned_runner=owned_runner,
            reference=reference,
            drawn=None if drawn is None else DrawnCache(drawn),
            config=config,
            executor_config=executor_config,
            steps=self.steps,
            worlds=worlds,
        )
        self.weight_setter = WeightSetter(
            self.view, state, self.metrics, version_key=config.version_key, warmup_full_at=config.warmup_full_at
        )
        self._attempted: int | None = None

    @property
    def snapshot(self) -> MetagraphSnapshot | None:
        """The last metagraph read, or ``None`` before the first read."""
        return self.view.snapshot

    @property
    def hyperparameters(self) -> Hyperparameters | None:
        """The subnet's hyperparameters as last read, or ``None`` before the first read."""
        return self.view.hyperparameters

    @property
    def hotkey(self) -> str:
        return self.chain.hotkey

    @property
    def step_outcomes(self):
        """How each recent step ended, newest last (:class:`~protocol.outcomes.StepOutcome`)."""
        return self.steps.outcomes

    @property
    def last_step(self) -> StepSummary | None:
        return self.steps.last_step

    @property
    def feedback(self) -> FeedbackSender:
        """Tells each queried miner how its own step went (:mod:`validator.feedback`)."""
        return self.stepper.feedback

    @property
    def drawn(self) -> DrawnFamilies | None:
        """The families drawn per tempo, offered besides the curated ones (``None``: curated only)."""
        return None if self.stepper.drawn is None else self.stepper.drawn.families

    @drawn.setter
    def drawn(self, drawn: DrawnFamilies | None) -> None:
        self.stepper.drawn = None if drawn is None else DrawnCache(drawn)

    @property
    def worlds(self) -> WorldSource | None:
        return self.stepper.worlds

    def past_world(self, tempo: int) -> World:
        """The hidden world of ``tempo``, once it is over, for every subnet this validator's
        tasks list: what it publishes so anyone can replay that tempo's records.
        :class:`WorldNotOver` while ``tempo`` is the current tempo or later, or before the
        chain has told the loop its block and tempo (nobody may learn a world in play);
        :class:`WorldNotPlayed` for a tempo none of whose steps this state keeps (a
        negative one, one before this validator ran, or one retention deleted)."""
        hyper, snapshot, worlds = self.view.hyperparameters, self.view.snapshot, self.worlds
        if hyper is None or snapshot is None or hyper.tempo <= 0 or tempo >= tempo_of(snapshot.block, hyper.tempo):
            raise WorldNotOver(f"tempo {tempo} is not over")
        assert worlds is not None, "no hidden world is played"
        first = tempo * hyper.tempo
        if tempo < 0 or not self.state.settled_between(first, first + hyper.tempo):
            raise WorldNotPlayed(f"tempo {tempo} was not played by this validator (no step of it is kept)")
        drawn = self.stepper.drawn
        kept = [] if drawn is None else drawn.kept_tasks()
        tools = {name: info for task in [*self.source.tasks(), *kept] for name, info in task.available_tools.items()}
        return worlds(self.state.instance_secret(first), tempo, tools)

    async def step(self, block: int) -> StepSummary | None:
        """One validation step at ``block`` (:meth:`validator.stepper.Stepper.step`)."""
        return await self.stepper.step(block)

    async def maybe_set_weights(self, block: int) -> bool:
        """Set weights if they are due at ``block`` (:meth:`validator.weights.WeightSetter.maybe_set`)."""
        return await self.weight_setter.maybe_set(block)

    async def run(self, stop: asyncio.Event) -> None:
        """Step at every new block, and set weights when they are due, until ``stop`` is set.

        The weights have a task of their own: a due weight-set never waits for a step.
        The feedback still in flight is ended before this returns, while the client is open."""
        settled = asyncio.Event()
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self._weights_when_due(stop, settled), name="weights")
                while not stop.is_set():
                    block = await self._next_block(stop)
                    if block is None:
                        break
                    await self.step(block)
                    settled.set()
        finally:
            await self.feedback.close()

    async def _next_block(self, stop: asyncio.Event) -> int | None:
        """The chain head once it is past the last step settled or tried (a step that
        settled nothing is not tried again at the same block); ``None`` when stopped.
        A head that cannot be read counts as an infrastructure failure: no step could run."""
        failures = 0
        while not stop.is_set():
            block = await self.view.head()
            if block is None:
                self.steps.infrastructure("chain")
                failures += 1
            else:
                failures = 0
                done = [b for b in (self.state.last_step_block(), self._attempted) if b is not None]
                if not done or block > max(done):
                    self._attempted = block
                    return block
            await _first_of(self._poll_wait(failures), stop)
        return None

    async def _weights_when_due(self, stop: asyncio.Event, settled: asyncio.Event) -> None:
        """The weights' own task: at every new head, and after every step (``settled``),
        set weights if they are due. Nothing a chain or the state does ends it."""
        checked: int | None = None
        failures = 0
        while not stop.is_set():
            block = await self.view.head()
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

    def _poll_wait(self, failures: int) -> float:
        """How long to wait before the next look at the head: longer while the chain does not answer."""
        return min(MAX_BACKOFF_S, self.config.poll_s * 2 ** min(failures, 8))


async def _first_of(timeout_s: float, *events: asyncio.Event) -> None:
    """Wait until one of ``events`` is set, or ``timeout_s`` has passed."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
