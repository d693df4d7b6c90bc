"""The validator's yardstick: the reference every miner's margin is measured against,
and the executing check every drawn family passes before it is sent.

The reference is the ``good`` planner (:mod:`planners.good`) planning on the forecast of
the tempo's world from the worlds published before it, declaring 10 retries a node
(:func:`planners.public.reference_plan`), its search bounded by counted steps alone so
every validator gets the same plan whatever its load, its plan run by owned execution on
the reference tools, exactly as a miner's plan runs. A change here
changes every miner's pay.
"""

from __future__ import annotations

from engine.model import NodeStatus
from engine.owned import evaluate_owned
from planners.naive import naive_with_retries
from planners.public import reference_plan
from protocol.outcomes import RunStatus
from protocol.synapse import TaskPackage, WorkflowSynapse
from protocol.validation import check_plan_for
from subnets.forecast import Forecast
from subnets.owned import owned_runner
from tasks import Family
from tasks.drawn import solves
from validator.lifecycle import Reference


def reference_failure(family: Family, seed: int) -> str | None:
    """The executing check's run of one instance (:data:`tasks.drawn.SeedRun`): the
    family's ``naive+retries`` plan on owned execution and simulated time, as a
    validator runs a miner's plan; it must complete with quality 1."""
    proposal = naive_with_retries(family.package)
    task = family.task(family.instance(seed))
    evaluation = evaluate_owned(
        proposal.plan,
        check_plan_for(proposal.plan, task),
        task,
        owned_runner(task),
        total_estimated_cost=proposal.total_estimated_cost,
    )
    score, execution = evaluation.score, evaluation.execution
    if execution.status == RunStatus.COMPLETED and score.completion_ratio == 1 and score.output_quality == 1:
        return None
    failed = {
        node: record.reason or record.status
        for node, record in execution.nodes.items()
        if record.status != NodeStatus.SUCCESS
    }
    return (
        f"reference plan does not solve seed {seed}: {execution.status}, quality "
        f"{score.output_quality:.3f}, completion {score.completion_ratio:.3f} {failed or ''}"
    ).rstrip()


reference_solves = solves(reference_failure)
"""The executing check every drawn family passes before a validator sends it."""


def reference() -> Reference:
    """How the validator judges a task (validator/lifecycle.py): ``good`` on the forecast
    of the tempo's world (the module), its plan run by owned execution on the reference tools."""

    def plan(package: TaskPackage, prior: Forecast | None) -> WorkflowSynapse:
        return reference_plan(package, prior).answer(package, miner_uid=0)

    return Reference(planner=plan, runner=owned_runner)
