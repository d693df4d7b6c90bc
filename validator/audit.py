"""Re-scoring a stored execution record, to check it bit for bit.

The record holds the step's task draw (base task id, instance seed, synthetic or
not, hint tier, and the tempo of a drawn family), the measured metrics and the final
output; the task source rebuilds the same task from the draw, at the recorded tier
(:func:`recorded_task`), and the same scorer the step used scores it again. Anyone
holding the validator's state file can rerun the judgement and compare it with
what was settled.

A record keeps a plan, a final output or a score whole only up to the state's cap
(:class:`~validator.state.Capped` beyond it), and the replay says what that leaves:

- a capped **score** is compared by its sha256 (the check is as strong as before);
- a capped **final output** cannot be scored again: its quality is taken from the
  stored score, and what is checked is that the task rebuilds from the draw and that
  the rest of the score follows from the stored metrics and that quality;
- both capped: only the task's rebuild is checked, nothing is compared.

A capped plan changes nothing: replay never reads the plan (its hash is kept whole).

The record's **margin** over the reference is checked the same way (:func:`replay_margin`):
the validator's reference is planned again on the rebuilt task (the record's instance
and tier) and run in the record's world, scored as the step scored it, and the record's
``S`` minus that ``reference_S`` is its margin again, bit for bit. A step that drew its
world several times (``draws``, :mod:`validator.draws`) is replayed over the same draws:
the reference and the record's stored plan run again in each, and the means compared.

A record that ran in a tempo's hidden world (``world_tempo``) is also **executed again**
when the replay is given that world (a validator's own, or the one it published once the
tempo was over, ``GET /world/<tempo>``): the stored plan runs on the rebuilt instance in
that world, under the recorded budget ceiling, on simulated time, and that execution's
score is what is compared. Every call's outcome is a pure function of the world, the
instance seed, the node and the attempt (:mod:`subnets.world`), so it matches bit for bit.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from engine.executor import ExecutorConfig
from engine.owned import OwnedLimits, evaluate_owned
from protocol.plan import WorkflowPlan
from protocol.task import Task
from protocol.validation import check_plan_for
from scoring.composite import invalid_score
from scoring.evaluate import saved_metrics, score_quality, score_run
from scoring.quality.base import Quality
from subnets.forecast import published_forecast
from subnets.holdings import holding
from subnets.owned import owned_runner
from subnets.world import World, world_for

from .draws import WorldRuns, mean_over
from .lifecycle import Reference, run_reference
from .reference import reference as validator_reference
from .sampling import DrawnFamilies, TaskDraw, TaskSource, source_of
from .state import Capped, ExecutionRecord, ValidatorState, canonical_json


@dataclass(frozen=True, slots=True)
class Replay:
    record_id: int | None
    stored: dict[str, Any] | Capped
    recomputed: dict[str, Any] | None
    """``None`` when nothing could be scored again (:attr:`unchecked` says why)."""
    unchecked: str | None = None
    """What the replay could not check, because the record kept a value capped; ``None``: everything."""

    @property
    def identical(self) -> bool | None:
        """Whether the score recomputed is the one stored; ``None`` when none could be recomputed."""
        if self.recomputed is None:
            return None
        recomputed = canonical_json(self.recomputed)
        if isinstance(self.stored, Capped):
            return hashlib.sha256(recomputed.encode()).hexdigest() == self.stored.sha256
        return canonical_json(self.stored) == recomputed


def recorded_task(
    record: ExecutionRecord, source: TaskSource, *, drawn: DrawnFamilies | None = None, secret: int = 0
) -> Task:
    """The task ``record``'s step sent, rebuilt from its draw: a curated family from
    ``source``, a drawn one from ``drawn(secret, record.drawn_tempo)``. Raises
    ``KeyError`` when the family is in neither."""
    origin = source_of(record.drawn_tempo, source, drawn, secret)
    base = next((t for t in origin.tasks() if t.task_id == record.base_task_id), None)
    if base is None:
        where = (
            "the task source" if record.drawn_tempo is None else f"the families drawn for tempo {record.drawn_tempo}"
        )
        raise KeyError(f"task {record.base_task_id!r} is not in {where}")
    return TaskDraw(base, record.instance_seed, record.synthetic, record.hint_tier, record.drawn_tempo).task(
        origin.instance
    )


def replay(
    record: ExecutionRecord,
    source: TaskSource,
    *,
    drawn: DrawnFamilies | None = None,
    secret: int = 0,
    world: World | None = None,
) -> Replay:
    """Score ``record`` again on :func:`recorded_task`; raises ``KeyError`` when its task
    cannot be rebuilt. A capped final output is not scored again (the module's docstring).
    With ``world`` (the record's tempo's), a plan kept whole is executed again in it."""
    if record.reason is not None or record.metrics is None:
        return _replayed(record, invalid_score(record.reason or "invalid response").model_dump(mode="json"))
    task = recorded_task(record, source, drawn=drawn, secret=secret)
    if world is not None and isinstance(record.plan, dict):
        return _replayed(record, rerun(record.plan, record.metrics.get("budget_ceiling"), task, world))
    metrics = saved_metrics(record.metrics)
    if not isinstance(record.final_output, Capped):
        return _replayed(
            record, score_run(task, metrics=metrics, final_output=record.final_output).model_dump(mode="json")
        )
    output = record.final_output.describe("final output")
    if isinstance(record.score, Capped):
        unchecked = f"{output}, and {record.score.describe('score')}: only the task's rebuild from its draw was checked"
        return Replay(record.id, record.score, None, unchecked)
    stored = Quality(record.score["output_quality"], record.score["details"].get("quality", {}))
    unchecked = (
        f"{output}: its quality was not scored again; checked: the task rebuilds from its draw, and the "
        "score follows from the stored metrics and the stored output quality"
    )
    return _replayed(record, score_quality(task, metrics=metrics, quality=stored).model_dump(mode="json"), unchecked)


@dataclass(frozen=True, slots=True)
class MarginReplay:
    """The reference replayed on a record's instance, tier and world: its ``S`` and the
    record's margin over it (``None`` when the reference produced no score)."""

    reference_S: float | None
    margin: float | None

    def matches(self, record: ExecutionRecord) -> bool:
        """Whether the record keeps this reference ``S`` and margin, bit for bit."""
        return (self.reference_S, self.margin) == (record.reference_S, record.margin)


def replay_margin(
    record: ExecutionRecord,
    source: TaskSource,
    reference: Reference,
    *,
    drawn: DrawnFamilies | None = None,
    secret: int = 0,
    world: World | None = None,
) -> MarginReplay:
    """Plan and run the validator's ``reference`` again on :func:`recorded_task` in ``world``
    (the record's tempo's; ``None``: the advertised profile), planned on the forecast of
    that tempo from the worlds of ``secret`` published before it, as the step ran it
    beside the miners; raises ``KeyError`` when the task cannot be rebuilt. Blocks."""
    task = recorded_task(record, source, drawn=drawn, secret=secret)
    runner = reference.runner if world is None else partial(reference.runner, world=world)
    prior = (
        None
        if world is None or world.tempo is None
        else published_forecast(world_for, secret, world.tempo, task.available_tools)
    )
    outcome = run_reference(reference, task, lambda t: holding(runner(t), t.holdings), prior=prior)
    if outcome.score is None:
        return MarginReplay(None, None)
    reference_s = outcome.score.S
    if record.draws > 1 and world is not None:  # the step drew again: so does its replay
        program = outcome.program
        assert program is not None  # the reference scored, so its plan ran
        runs = WorldRuns(task, world, reference.runner, ExecutorConfig(), OwnedLimits())
        reference_s = mean_over([reference_s, *(runs.score(program, k) for k in range(1, record.draws))])
    paid = _paid(record, task, world)
    return MarginReplay(reference_s, None if paid is None else paid - reference_s)


def _paid(record: ExecutionRecord, task: Task, world: World | None) -> float | None:
    """The record's ``S`` the margin is on: its mean over the step's draws, its plan run
    again in each (``None`` when its score or plan was capped); else its score's ``S``."""
    if not isinstance(record.score, dict):
        return None
    first = float(record.score["S"])
    if record.drawn_S is None or world is None:
        return first
    if not isinstance(record.plan, dict) or record.metrics is None:
        return None
    ceiling = record.metrics.get("budget_ceiling")
    again = [rerun(record.plan, ceiling, task, world.drawn(k))["S"] for k in range(1, record.draws)]
    return mean_over([first, *again])


def _replayed(record: ExecutionRecord, recomputed: dict[str, Any], unchecked: str | None = None) -> Replay:
    return Replay(record.id, record.score, recomputed, unchecked)


def rerun(plan_json: dict[str, Any], budget_ceiling: float | None, task: Task, world: World) -> dict[str, Any]:
    """The score of ``plan_json`` executed again on ``task``'s instance in ``world`` under
    the recorded ``budget_ceiling``, as owned execution ran it."""
    plan = WorkflowPlan.model_validate(plan_json)
    evaluation = evaluate_owned(
        plan,
        check_plan_for(plan, task),
        task,
        owned_runner(task, world=world),
        total_estimated_cost=None,
        recorded_ceiling=budget_ceiling,
    )
    return evaluation.score.model_dump(mode="json")


def replay_record(
    config_state: Path, record_id: int, source: TaskSource, drawn: DrawnFamilies | None
) -> dict[str, Any]:
    """``dagnet validator --replay``: re-score one stored execution of the state file at
    ``config_state``, its task rebuilt from ``source`` (and ``drawn``). The result says
    whether it matched bit for bit (``None``: nothing could be compared) and what a capped record left unchecked. A
    drawn family is drawn again from the state's secret and the record's tempo. A record
    with a margin has the reference replayed on its instance, tier and world too
    (:func:`replay_margin`): identical means the margin is, too."""
    state = ValidatorState(config_state)
    try:
        record = state.execution(record_id)
        if record is None:
            raise LookupError(f"no execution record {record_id} in {config_state}")
        secret = state.instance_secret(record.block)  # the secret in effect at the record's step
    finally:
        state.close()
    world = None
    if record.world_tempo is not None:  # the record ran in that tempo's hidden world: run it there again
        tools = recorded_task(record, source, drawn=drawn, secret=secret).available_tools
        world = world_for(secret, record.world_tempo, tools)
    result = replay(record, source, drawn=drawn, secret=secret, world=world)
    stored = dataclasses.asdict(result.stored) if isinstance(result.stored, Capped) else result.stored
    identical, margin = result.identical, None
    if record.reference_S is not None:  # the reference's run beside the miners, replayed: the same margin
        again = replay_margin(record, source, validator_reference(), drawn=drawn, secret=secret, world=world)
        margin = {
            "stored": {"reference_S": record.reference_S, "margin": record.margin},
            "recomputed": dataclasses.asdict(again),
            "identical": again.matches(record),
        }
        identical = None if identical is None else identical and again.matches(record)
    return {
        "record": record_id,
        "identical": identical,
        "stored": stored,
        "recomputed": result.recomputed,
        "unchecked": result.unchecked,
        "explanation": record.explain(),
        "margin": margin,
    }
