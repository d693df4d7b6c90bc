"""The executing check of drawn families (docs/tasks.md, "Drawn families"): a family's
reference plan, run as a validator runs a plan, must solve its instances.

``tasks`` may import only ``protocol``, so :func:`tasks.drawn.drawn_families` takes this
check as its ``verify`` argument; :func:`checked_drawn_families` is the draw with it.
The reference plan is the family's own program (its full-tier steps, chained on the
first allowed subnet of each kind with one retry per node: ``naive+retries``); each of its
checked instances (:func:`verified_seeds`: the public examples, then a hidden one) runs on owned
execution and simulated time (:func:`engine.owned.evaluate_owned`, the reference tools
playing the subnets, the instance's held data behind its ids) and must complete with
quality 1.

Wiring only: the plan is the bench's, execution and scoring the validator's.
"""

from __future__ import annotations

from protocol.hints import EXAMPLES
from protocol.validation import check_plan_for
from engine.owned import evaluate_owned
from bench.tasks import propose
from subnets.owned import owned_runner
from tasks import Family
from tasks.drawn import check_seeds, drawn_families
from tasks.seed import public_seed

__all__ = ["VERIFIED", "VERIFIED_CODE", "checked_drawn_families", "reference_solves", "verified_seeds"]

VERIFIED = EXAMPLES + 1
"""Instances the reference plan runs on: every public example and one hidden instance."""
VERIFIED_CODE = 1
"""A code family's reference plan runs on its first public example only: a run there costs
two sandboxed processes (about a second), and the grammar's check has already run the
module's body on the cases of every checked instance (``tasks.grammar_code``)."""


def verified_seeds(family: Family) -> list[int]:
    """The public examples, then hidden instances: :data:`VERIFIED` (code: :data:`VERIFIED_CODE`) in all."""
    n = VERIFIED_CODE if family.task_type == "code" else VERIFIED
    seeds = [public_seed(family.task_id, i) for i in range(EXAMPLES)] + check_seeds(family.task_id)
    return seeds[:n]


def reference_solves(family: Family) -> str | None:
    """Why ``family``'s reference plan fails one of its checked instances, or ``None``."""
    proposal = propose(family, "naive+retries")
    for seed in verified_seeds(family):
        task = family.task(family.instance(seed))
        check = check_plan_for(proposal.plan, task)
        evaluation = evaluate_owned(proposal.plan, check, task, owned_runner(task),
                                    total_estimated_cost=proposal.total_estimated_cost)
        score, execution = evaluation.score, evaluation.execution
        if execution.status != "completed" or score.completion_ratio < 1 or score.output_quality < 1:
            failed = {node: record.reason or record.status for node, record in execution.nodes.items()
                      if record.status != "success"}
            return (f"reference plan does not solve seed {seed}: {execution.status}, quality "
                    f"{score.output_quality:.3f}, completion {score.completion_ratio:.3f} {failed or ''}").rstrip()
    return None


def checked_drawn_families(secret: int, tempo: int, count: int) -> tuple[Family, ...]:
    """:func:`tasks.drawn.drawn_families` with the executing check (cached per arguments)."""
    return drawn_families(secret, tempo, count, verify=reference_solves)
