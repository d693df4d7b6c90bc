"""The validator's Prometheus metrics, in a registry of their own.

Names carry their unit (``_seconds``, ``_tao``, ``_block``) and counters end in
``_total``. Labels are bounded: miners are labelled by ``uid`` (at most 256 per
subnet), never by hotkey; subnets by the names the task set publishes; statuses,
phases and hint tiers by fixed vocabularies.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from protocol.hints import TIERS
from protocol.metagraph import MetagraphSnapshot
from protocol.outcomes import RunStatus, StepOutcome
from scoring.margin import Means, Payout, beat_share

from .draws import MOST_DRAWS
from .lifecycle import INFRASTRUCTURE_CAUSES

if TYPE_CHECKING:
    from .state import Standing

PHASES = ("sync", "query", "execute", "score", "reference", "draws", "record", "weights", "step")
EXECUTION_STATUSES = (*RunStatus, "not_run")
WEIGHTS_RESULTS = ("success", "refused", "error", "nothing_to_set")
STEP_RESULTS = (StepOutcome.SETTLED, "error")
"""The ``outcome`` label of ``dagnet_validator_steps_total``: a settled step, or one lost
to an infrastructure failure (``error``); an idle step is not counted."""
SANDBOX_OUTCOMES = ("ran", "unavailable", "not_run")

_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 60.0)
_SCORE = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
_TAO = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0)


class ValidatorMetrics:
    """Everything a dashboard needs to see a validator work; see docs/observability.md."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.steps = Counter(
            "dagnet_validator_steps_total", "Validation steps, by outcome (settled, error).", ["outcome"], registry=r
        )
        self.phase = Histogram(
            "dagnet_validator_step_phase_seconds",
            "Wall time of each phase of a step.",
            ["phase"],
            buckets=_SECONDS,
            registry=r,
        )
        self.draws = Histogram(
            "dagnet_validator_margin_draws",
            "Draws of the hidden world each step's margins are means over (validator/draws.py).",
            buckets=tuple(range(1, MOST_DRAWS + 1)),
            registry=r,
        )
        self.executions = Counter(
            "dagnet_validator_executions_total",
            "Miner answers handled, by execution status (not_run: never executed) and the hint tier sent.",
            ["status", "tier"],
            registry=r,
        )
        self.execution_score = Histogram(
            "dagnet_validator_execution_score",
            "The score S of each miner answer handled, by the hint tier sent.",
            ["tier"],
            buckets=_SCORE,
            registry=r,
        )
        self.node_latency = Histogram(
            "dagnet_validator_node_latency_seconds",
            "Time from a node's dispatch to its settlement, by subnet.",
            ["subnet"],
            buckets=_SECONDS,
            registry=r,
        )
        self.cost = Histogram(
            "dagnet_validator_execution_cost_tao",
            "TAO charged by tool providers for one execution.",
            buckets=_TAO,
            registry=r,
        )
        self.budget_aborts = Counter(
            "dagnet_validator_budget_aborts_total", "Executions stopped at their budget ceiling.", registry=r
        )
        self.timeouts = Counter(
            "dagnet_validator_timeouts_total",
            "Timeouts: a miner's answer (query) or a node attempt (node).",
            ["kind"],
            registry=r,
        )
        self.score = Gauge("dagnet_validator_score", "Each miner's windowed mean score S.", ["uid"], registry=r)
        self.weight = Gauge(
            "dagnet_validator_weight", "The weight last set on chain for each miner.", ["uid"], registry=r
        )
        self.margin = Gauge(
            "dagnet_validator_margin",
            "Each miner's window mean credited margin over the validator's reference.",
            ["uid"],
            registry=r,
        )
        self.margin_bar = Gauge(
            "dagnet_validator_margin_bar",
            "The margin each miner must exceed to be paid as a beater: its error counted in worlds times the bar"
            " for that many worlds (+Inf before two worlds).",
            ["uid"],
            registry=r,
        )
        self.beats_reference = Gauge(
            "dagnet_validator_beats_reference",
            "Each miner's share of its window's steps that beat the reference.",
            ["uid"],
            registry=r,
        )
        self.payout = Gauge(
            "dagnet_validator_payout",
            "1 for where the last accepted weights sent the emission, else 0.",
            ["kind"],
            registry=r,
        )
        self.weights_set = Counter(
            "dagnet_validator_weights_set_total", "set_weights attempts, by the chain's result.", ["result"], registry=r
        )
        self.last_weights_block = Gauge(
            "dagnet_validator_last_weights_block", "The block at which weights were last accepted.", registry=r
        )
        self.tempo = Gauge("dagnet_validator_tempo_blocks", "The subnet's tempo, in blocks.", registry=r)
        self.metagraph_block = Gauge(
            "dagnet_validator_metagraph_block", "The block of the last metagraph sync.", registry=r
        )
        self.sync_age = Gauge(
            "dagnet_validator_metagraph_sync_age_seconds", "Seconds since the metagraph was last synced.", registry=r
        )
        self.incentive = Gauge(
            "dagnet_validator_miner_incentive",
            "Each miner's incentive in the last epoch, as the chain reports it.",
            ["uid"],
            registry=r,
        )
        self.emission = Gauge(
            "dagnet_validator_miner_emission_tao",
            "What the last epoch paid each miner, as the chain reports it.",
            ["uid"],
            registry=r,
        )
        self.chain_errors = Counter(
            "dagnet_validator_chain_errors_total", "Chain calls that failed, by call.", ["call"], registry=r
        )
        self.tasks = Gauge("dagnet_validator_tasks", "Benchmark tasks by lifecycle state.", ["state"], registry=r)
        self.infrastructure_failures = Counter(
            "dagnet_validator_infrastructure_failures_total",
            "Steps skipped (or head reads lost) for a cause no miner or task had, by cause.",
            ["cause"],
            registry=r,
        )
        self.sandbox_runs = Counter(
            "dagnet_validator_sandbox_runs_total",
            "Sandboxed judgements of code outputs, by outcome.",
            ["outcome"],
            registry=r,
        )
        self.version_key = Gauge(
            "dagnet_validator_version_key", "The scoring version published with weights.", registry=r
        )
        self.chain_weights_version = Gauge(
            "dagnet_validator_chain_weights_version",
            "The least version_key the chain accepts weights with (the subnet's weights_version).",
            registry=r,
        )
        self.upgrade_needed = Gauge(
            "dagnet_validator_upgrade_needed",
            "1 while the chain's weights_version is above this validator's version_key: upgrade dagnet.",
            registry=r,
        )
        self.degraded = Gauge(
            "dagnet_validator_degraded",
            "1 while the validator is degraded for this reason (see /health), else 0.",
            ["reason"],
            registry=r,
        )
        self.started_at = time.monotonic()
        self.first_block: int | None = None
        """The block of the first metagraph this process read."""
        self._synced_at: float | None = None
        self.sync_age.set_function(self._sync_age)
        # Every label value of a fixed vocabulary exists from the start, at 0, so a rate
        # or an alert over it has data before the first event of that kind.
        for counter, values in (
            (self.steps, STEP_RESULTS),
            (self.weights_set, WEIGHTS_RESULTS),
            (self.timeouts, ("query", "node")),
            (self.sandbox_runs, SANDBOX_OUTCOMES),
            (self.phase, PHASES),
            (self.infrastructure_failures, INFRASTRUCTURE_CAUSES),
        ):
            for value in values:
                counter.labels(value)
        for kind in Payout:
            self.payout.labels(kind)
        for tier in TIERS:
            self.execution_score.labels(tier)
            for status in EXECUTION_STATUSES:
                self.executions.labels(status, tier)

    def synced(self, snapshot: MetagraphSnapshot) -> None:
        """A fresh metagraph: its block, and each serving miner's incentive and emission."""
        self.metagraph_block.set(snapshot.block)
        self._synced_at = time.monotonic()
        if self.first_block is None:
            self.first_block = snapshot.block
        self.incentive.clear()
        self.emission.clear()
        for neuron in snapshot.neurons:
            if neuron.axon is not None:
                self.incentive.labels(str(neuron.uid)).set(neuron.incentive)
                self.emission.labels(str(neuron.uid)).set(neuron.emission)

    def _sync_age(self) -> float:
        age = self.metagraph_age_s()
        return float("nan") if age is None else age

    def metagraph_age_s(self) -> float | None:
        """Seconds since the last metagraph sync; ``None`` before the first."""
        return None if self._synced_at is None else time.monotonic() - self._synced_at

    def uptime_s(self) -> float:
        return time.monotonic() - self.started_at

    def watch_health(self, codes: Iterable[str], reasons: Callable[[], Collection[str]]) -> None:
        """Export ``dagnet_validator_degraded{reason}`` for every code of ``codes``, 1 while
        ``reasons()`` (the codes that hold now) has it: read afresh at every scrape, so each
        gauge is as current as ``/health`` (:mod:`validator.health`)."""
        for code in codes:

            def degraded(code: str = code) -> float:
                return float(code in reasons())

            self.degraded.labels(code).set_function(degraded)

    def task_states(self, states: Mapping[str, str], vocabulary: tuple[str, ...]) -> None:
        for state in vocabulary:
            self.tasks.labels(state).set(sum(1 for s in states.values() if s == state))

    def standing(self, standing: Standing) -> None:
        """Each miner's window after a step: its mean score and its margins over the reference."""
        self.scores(standing.window.means())
        self.margins(standing.means(), standing.margins)

    def scores(self, means: Mapping[int, float]) -> None:
        for uid, mean in means.items():
            self.score.labels(str(uid)).set(mean)

    def weights(self, weights: Mapping[int, float]) -> None:
        self.weight.clear()
        for uid, value in weights.items():
            self.weight.labels(str(uid)).set(value)

    def margins(self, means: Mapping[int, Means], steps: Mapping[int, Sequence[float]]) -> None:
        """Each uid's mean margin as pay reads it (over its last worlds, 0 while empty), the
        bar it must exceed to be a beater (``k·SE``, :mod:`scoring.worlds`), and the share of
        its last steps with a positive margin, the steps that beat the reference."""
        for uid, mean in means.items():
            self.margin.labels(str(uid)).set(mean.margin)
            self.margin_bar.labels(str(uid)).set(mean.bar)
        for uid, margins in steps.items():
            self.beats_reference.labels(str(uid)).set(beat_share(margins))

    def paid(self, payout: Payout) -> None:
        """Where the weights the chain just accepted sent the emission."""
        for kind in Payout:
            self.payout.labels(kind).set(float(kind is payout))
