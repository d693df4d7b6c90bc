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

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

from engine.budget import Cores
from engine.executor import ExecutorConfig
from engine.owned import OwnedLimits, OwnedRunnerFactory
from protocol.synapse import ToolInfo
from protocol.task import Task
from scoring.margin import Answer, Credit, credits, outcome_key
from subnets.forecast import Forecast, published_forecast
from subnets.holdings import holding
from subnets.world import World, WorldSource

from .draws import DrawLimits, Program, WorldRuns, drawn_means
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


@dataclass(frozen=True, slots=True)
class ReferenceRuns:
    """The reference's part in a step: why it did not succeed on the ``full`` package (for
    the task's lifecycle; ``None``: it did), its ``S`` on the package as sent, run as the
    miners' plans ran (``None``: no margin run), and that answer, to draw again
    (:mod:`validator.draws`; ``None`` without a margin run)."""

    failure: str | None
    score: float | None = None
    program: Program | None = None


def reference_runs(
    reference: Reference,
    task: Task,
    full: Task,
    miners: MinersRun | None,
    *,
    config: ExecutorConfig,
) -> ReferenceRuns:
    """The reference's verdict on ``full`` and its ``S`` on ``task`` as sent, run as
    ``miners`` run (``None``: no margin run, e.g. plans that run on external adapters;
    ``S`` is then ``None``, as when the reference cannot plan ``task``'s tier). Blocks.

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
    program = None if score is None or outcome is None else outcome.program
    if outcome is not None and miners is not None and task is full and (not miners.in_world or outcome.answer is None):
        # one run serves both, or the full package cannot be planned at all
        return ReferenceRuns(outcome.failure, score, program)
    answer = outcome.answer if outcome is not None and task is full else None
    judged = run_reference(reference, full, reference.runner, config=config, owned=reference.limits, answer=answer)
    return ReferenceRuns(judged.failure, score, program)


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


@dataclass(frozen=True, slots=True)
class DrawnStep:
    """A step's ``S`` the margins are taken on: the reference's, each drawn miner's (uid →
    its mean), and how many draws of the world they are means over (1: the step's own run)."""

    reference_s: float | None
    miners: dict[int, float] = field(default_factory=dict)
    draws: int = 1
    stopped: str | None = None
    """Why drawing stopped (:data:`validator.draws.STOPS`); ``None``: nothing was drawn."""


_REFERENCE = "reference"
"""The reference's key among a step's drawn programs (a miner's is a tuple)."""


def drawn_step(
    runs: WorldRuns | None, outcomes: Sequence[MinerOutcome], reference: ReferenceRuns, limits: DrawLimits
) -> DrawnStep:
    """The reference's and every scored answer's mean ``S`` over the draws of ``runs``'
    world (:mod:`validator.draws`; copies run once), or the step's own ``S`` when nothing
    is drawn (``runs`` ``None``: no hidden world; or no reference program). Blocks."""
    if runs is None or reference.program is None or reference.score is None:
        return DrawnStep(reference.score)
    programs: dict[Hashable, tuple[Program, float]] = {_REFERENCE: (reference.program, reference.score)}
    for outcome in outcomes:
        if outcome.program_key is not None and outcome.program is not None:
            programs.setdefault(outcome.program_key, (outcome.program, outcome.score.S))
    drawn = drawn_means(runs, programs, limits)
    miners = {o.uid: drawn.means[o.program_key] for o in outcomes if o.program_key is not None}
    return DrawnStep(drawn.means[_REFERENCE], miners, drawn.draws, drawn.stopped)


def step_credits(
    outcomes: Sequence[MinerOutcome], reference_s: float | None, drawn: Mapping[int, float] | None = None
) -> dict[int, Credit]:
    """Each scored miner's credit over the reference's ``S`` (:func:`scoring.margin.credits`),
    on its ``S`` over the step's draws where ``drawn`` has it (uid → mean ``S``,
    :mod:`validator.draws`; ``reference_s`` is then the reference's mean over the same
    draws). None without a reference score."""
    if reference_s is None:
        return {}
    paid = drawn or {}
    answers = {
        outcome.uid: Answer(outcome.digest, paid.get(outcome.uid, outcome.score.S), _did(outcome))
        for outcome in outcomes
    }
    return credits(answers, reference_s)


def _did(outcome: MinerOutcome) -> str | None:
    """A key of what ``outcome``'s execution did: its ``S`` and final output."""
    if outcome.execution is None:
        return None
    return outcome_key(outcome.score.S, outcome.execution.final_output)
