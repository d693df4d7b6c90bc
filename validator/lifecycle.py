"""What moves a task's lifecycle, and what stops a step without charging anyone.

A task is set aside only for the validator's own reason: the validator plans the
instance it sends with its reference planner (the ``good`` strategy, injected by
``neurons/``), runs that plan itself through owned execution and scores it. When
that reference run does not succeed, the task (or its generator) is broken for
that instance; :class:`validator.state.ValidatorState` counts such steps and sets
the task aside after :data:`~validator.state.SET_ASIDE_AFTER` of them in a row.
How many miners fail a task never counts: no peer can move a task's lifecycle.

"Does not succeed" means the reference execution's status is not ``completed``
(a node failed, the budget or the deadline ran out) or its output quality is 0.
A planner that cannot plan the task (it raises ``ValueError``) or plans something
the task's own checks reject is the task's failure too.

Anything that crashes on the way — the planner with any other exception, the
executor, the scorer — is an :class:`InfrastructureFailure`: the validator's own
machinery is broken, so the step is skipped and neither a miner nor the task is
charged. So is a reference scored 0 because this machine cannot judge code (no
sandbox, or one that cannot hide the validator's files: :func:`no_sandbox`). Because the reference run uses the same executor and scorer as the
miners' plans, it is also the validator's check that those work at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine.budget import Cores
from engine.evaluate import score_execution
from engine.executor import SUCCESS, Execution, ExecutorConfig
from engine.owned import OwnedLimits, OwnedRunnerFactory, run_owned
from protocol.limits import DEFAULT_LIMITS, Limits
from protocol.outcomes import RunStatus
from protocol.runner import NodeRunner
from protocol.synapse import TaskPackage, WorkflowSynapse
from protocol.task import Task
from protocol.validation import check_plan_for
from scoring.composite import Score
from scoring.quality.base import UNJUDGED, Unjudged
from subnets.forecast import Forecast

from .draws import Program
from .failures import INFRASTRUCTURE_CAUSES, InfrastructureFailure

__all__ = [
    "INFRASTRUCTURE_CAUSES",
    "InfrastructureFailure",
    "Reference",
    "ReferenceOutcome",
    "ReferencePlanner",
    "no_sandbox",
    "reference_failure",
    "run_reference",
]

ReferencePlanner = Callable[[TaskPackage, Forecast | None], WorkflowSynapse]
"""The validator's own planner: a task package and what the published past says about
the tempo's world (:func:`subnets.forecast.forecast`; ``None`` when no hidden world is
played) in, the answer a miner would send out. Raises ``ValueError`` when it cannot plan
the task."""

_REASON_CHARS = 300


@dataclass(frozen=True, slots=True)
class Reference:
    """How the validator judges a task: its planner, and the runner that plays the
    task's partner subnets in owned execution (:func:`engine.owned.run_owned`)."""

    planner: ReferencePlanner
    runner: OwnedRunnerFactory
    limits: OwnedLimits = OwnedLimits()


@dataclass(frozen=True, slots=True)
class ReferenceOutcome:
    """What the reference did on one task package: why it did not succeed (``None``: it
    did) and its score, the ``S`` margins are taken over (``None`` when it produced no
    execution: it could not plan the package, or its plan is invalid)."""

    failure: str | None
    score: Score | None = None
    answer: WorkflowSynapse | None = None
    """The reference's answer, to run again elsewhere without planning twice."""
    program: Program | None = None
    """That answer as it ran (its plan, the plan's check, its declared cost), to draw again
    (:mod:`validator.draws`); ``None`` when it produced no execution."""


def reference_failure(
    reference: Reference, task: Task, *, config: ExecutorConfig = ExecutorConfig(), limits: Limits = DEFAULT_LIMITS
) -> str | None:
    """Why the reference did not succeed on ``task``'s instance, or ``None`` when it did
    (:func:`run_reference` on the reference's own runner). Blocks: call it in a worker thread.

    Raises :class:`InfrastructureFailure` when the planner, executor or scorer crashes.
    """
    return run_reference(
        reference, task, reference.runner, config=config, limits=limits, owned=reference.limits
    ).failure


def run_reference(
    reference: Reference,
    task: Task,
    runner: Callable[[Task], NodeRunner],
    *,
    config: ExecutorConfig = ExecutorConfig(),
    limits: Limits = DEFAULT_LIMITS,
    owned: OwnedLimits = OwnedLimits(),
    cores: Cores | None = None,
    answer: WorkflowSynapse | None = None,
    prior: Forecast | None = None,
) -> ReferenceOutcome:
    """Plan ``task``'s package with the reference on the forecast ``prior`` (or take its ``answer``), run the plan on
    the runner ``runner`` builds for ``task`` through owned execution and score it, as a validator scores a miner's plan
    (:func:`engine.owned.evaluate_owned`, in its two parts so a crash names the part).
    Blocks: call it in a worker thread.

    Raises :class:`InfrastructureFailure` when the planner, executor or scorer crashes.
    """
    package = task.package()
    if answer is None:
        try:
            answer = reference.planner(package, prior)
        except ValueError as exc:
            return ReferenceOutcome(_short(f"the reference planner cannot plan it: {exc}"))
        except Exception as exc:
            raise InfrastructureFailure("reference", f"{type(exc).__name__}: {exc}") from exc
    plan = answer.workflow_plan
    if plan is None:
        return ReferenceOutcome(_short("the reference answered without a plan"))
    check = check_plan_for(plan, package, limits=limits)
    if not check.runnable:
        return ReferenceOutcome(_short(f"the reference plan is invalid: {'; '.join(check.errors)}"))
    try:
        execution = run_owned(
            plan,
            check,
            task,
            runner(task),
            total_estimated_cost=answer.total_estimated_cost,
            config=config,
            limits=limits,
            owned=owned,
            cores=cores,
        )
    except Exception as exc:
        raise InfrastructureFailure("executor", f"{type(exc).__name__}: {exc}") from exc
    try:
        score = score_execution(task, check, execution)
    except Exception as exc:
        raise InfrastructureFailure("scorer", f"{type(exc).__name__}: {exc}") from exc
    program = Program(plan, check, answer.total_estimated_cost)
    if execution.status != RunStatus.COMPLETED:
        failure = _short(f"the reference execution is {execution.status}: {_first_failure(execution)}")
        return ReferenceOutcome(failure, score, answer, program)
    if no_sandbox(score):
        raise InfrastructureFailure("scorer", _short(f"this machine cannot judge code: {score.details['quality']}"))
    if score.output_quality <= 0:
        return ReferenceOutcome(
            _short(f"the reference output has quality 0: {score.details.get('quality')}"), score, answer, program
        )
    return ReferenceOutcome(None, score, answer, program)


def no_sandbox(score: Score) -> bool:
    """Whether ``score`` is 0 because this machine cannot judge code, not because of the code."""
    quality = score.details.get("quality")
    return isinstance(quality, dict) and quality.get(UNJUDGED) == Unjudged.NO_SANDBOX


def _first_failure(execution: Execution) -> str:
    for node_id, node in execution.nodes.items():
        if node.status != SUCCESS:
            return f"node {node_id} {node.status}: {node.reason}"
    return "no node failed"


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"
