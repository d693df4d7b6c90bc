"""The naive reference strategy: what a plan looks like when nothing is optimised.

Every step in the listed order, one after the other (edges ``i -> i+1``, and the
edges of its references, which the chain already implies), each on
the first allowed subnet of its kind in the task's listing, with no retries and no
timeouts declared. The plan is valid and completes whenever the listed subnets
answer first time and the steps are listed in dependency order (every DataRef
names an earlier step); it simply leaves latency, cost and flakiness on the table,
which is what a local network needs to show the incentive working.

It plans from ``full`` hints only: an ``outline`` or ``goal`` package (no params, or no
steps) is refused with :class:`PlanningError`, so it scores 0 there.
"""

from __future__ import annotations

from protocol.plan import ErrorPolicy
from protocol.synapse import TaskPackage

from .base import PlanningError, PlanProposal, estimate
from .steps import Placement, compile_plan, options, read_steps

_CONFIDENCE = 0.5


class NaivePlanner:
    name = "naive"

    def plan(self, package: TaskPackage) -> PlanProposal:
        if package.hint_tier != "full":
            raise PlanningError(
                f"naive plans from full step hints only; this package is at the {package.hint_tier} tier"
            )
        read_steps(package)  # same input checks as every strategy
        placements = [Placement(step, options(package, step)[0], attempts=1) for step in package.steps]
        plan = compile_plan(package, placements, chain=True)
        reasoning = (
            f"sequential chain of {len(plan.nodes)} steps in the listed order; "
            "first allowed subnet of each kind; no retries or timeouts declared"
        )
        cost, latency = estimate(plan)
        return PlanProposal(plan, cost, latency, _CONFIDENCE, reasoning)


def naive_with_retries(package: TaskPackage) -> PlanProposal:
    """``naive+retries``: naive's chain with one retry per node; the reference plan a drawn
    family must solve before a validator sends it, and the benches' second baseline."""
    proposal = NaivePlanner().plan(package)
    retries = {node.id: ErrorPolicy(retry_count=1) for node in proposal.plan.nodes}
    plan = proposal.plan.model_copy(update={"error_handling": retries})
    return PlanProposal(
        plan,
        proposal.total_estimated_cost,
        proposal.total_estimated_latency,
        proposal.confidence,
        proposal.reasoning + "; one retry per node",
    )
