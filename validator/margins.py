"""A step's reference runs and the miners' margins over them (docs/validator.md, "The
margin over the reference").

Each step the validator's reference plans the package the miners got and runs it exactly
as their plans run — the same runner in the same hidden world, holdings, executor
config, budget ceiling rule, share of the step's work and scorer — so a miner that sends
the reference's plan scores the reference's ``S`` bit for bit, and its margin is 0.0.
The task's lifecycle is judged apart, at ``full`` on the advertised profile
(:mod:`validator.lifecycle`): a world in which the reference's plan fails says nothing
about the task, and is where a better planner beats the reference. When the two runs are
the same run (the ``full`` tier, no world) one serves both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from engine.budget import Cores
from engine.executor import ExecutorConfig
from engine.owned import OwnedLimits, OwnedRunnerFactory
from protocol.synapse import ToolInfo
from protocol.task import Task
from scoring.margin import Answer, Credit, credits, outcome_key
from subnets.forecast import Forecast, published_forecast
from subnets.holdings import holding
from subnets.world import World, WorldSource

from .lifecycle import Reference, run_reference
from .outcome import MinerOutcome


@dataclass(frozen=True, slots=True)
class MinersRun:
    """How the step's miners' plans run: the runner (in the step's world), the executor
    config, one plan's owned limits (its share of the step's work) and the machine's cores."""

    runner: OwnedRunnerFactory
    config: ExecutorConfig
    owned: OwnedLimits
    cores: Cores | None = None
    prior: Callable[[], Forecast | None] | None = None
    """When ``runner`` plays a hidden world (not the advertised profile): what the
    published past says about it, worked out when the reference plans (it blocks), and
    what the reference plans on."""

    @property
    def in_world(self) -> bool:
        return self.prior is not None


def reference_runs(
    reference: Reference,
    task: Task,
    full: Task,
    miners: MinersRun | None,
    *,
    config: ExecutorConfig,
) -> tuple[str | None, float | None]:
    """The reference's verdict on ``full`` (why it did not succeed, for the task's
    lifecycle; ``None``: it did) and its ``S`` on ``task`` as sent, run as ``miners`` run
    (``None``: no margin run, e.g. plans that run on external adapters; ``S`` is then
    ``None``, as when the reference cannot plan ``task``'s tier). Blocks.

    Raises :class:`~validator.lifecycle.InfrastructureFailure` when the planner, executor
    or scorer crashes in either run."""
    outcome = None
    if miners is not None:
        runner = miners.runner
        outcome = run_reference(
            reference,
            task,
            lambda t: holding(runner(t), t.holdings),
            config=miners.config,
            owned=miners.owned,
            cores=miners.cores,
            prior=None if miners.prior is None else miners.prior(),
        )
    score = None if outcome is None or outcome.score is None else outcome.score.S
    if outcome is not None and miners is not None and task is full and (not miners.in_world or outcome.answer is None):
        return outcome.failure, score  # one run serves both, or the full package cannot be planned at all
    answer = outcome.answer if outcome is not None and task is full else None
    judged = run_reference(reference, full, reference.runner, config=config, owned=reference.limits, answer=answer)
    return judged.failure, score


class Forecasts:
    """The forecasts (:func:`subnets.forecast.published_forecast`) of one tempo's world
    from the worlds published before it, kept while that tempo lasts."""

    def __init__(self, worlds: WorldSource) -> None:
        self.worlds = worlds
        self._kept: dict[tuple[int, int, tuple[tuple[str, str, int], ...]], Forecast] = {}

    def __call__(self, secret: int, world: World, tools: Mapping[str, ToolInfo]) -> Forecast | None:
        """The forecast of ``world``'s tempo, drawn with ``secret``, for the subnets ``tools``
        lists (a subnet's truth depends on its id, type and whether it is advertised
        flaky); ``None`` for a world of no tempo. Blocks."""
        tempo = world.tempo
        if tempo is None:
            return None
        key = (secret, tempo, tuple(sorted((name, info.type, info.fail_first) for name, info in tools.items())))
        found = self._kept.get(key)
        if found is None:
            if any(kept[1] != tempo for kept in self._kept):
                self._kept = {}
            found = self._kept[key] = published_forecast(self.worlds, secret, tempo, tools)
        return found


def step_credits(outcomes: Sequence[MinerOutcome], reference_s: float | None) -> dict[int, Credit]:
    """Each scored miner's credit over the reference's ``S`` (:func:`scoring.margin.credits`):
    the answers grouped by their plan's canonical digest and by what they did (``S`` and
    final output), so copies, and variants that change nothing, share one answer's margin.
    None without a reference score."""
    if reference_s is None:
        return {}
    answers = {outcome.uid: Answer(outcome.digest, outcome.score.S, _did(outcome)) for outcome in outcomes}
    return credits(answers, reference_s)


def _did(outcome: MinerOutcome) -> str | None:
    """A key of what ``outcome``'s execution did: its ``S`` and final output."""
    if outcome.execution is None:
        return None
    return outcome_key(outcome.score.S, outcome.execution.final_output)
