"""Planning on a world: ``good`` on the profile a world tells, declaring the retries it needs.

A :class:`subnets.world.World` says how each subnet behaves (true or predicted). Planning
on it is ``good`` given :meth:`World.tools` as the package's ``available_tools`` (expected
latency with its tail, price, expected extra attempts), each node then declaring
:data:`RETRIES`, the most a plan may: a failed attempt is charged nothing and a declared
retry is never penalised, while a node that runs out of attempts costs the step most of
its score. At the hidden world's rates (an attempt failing up to about one time in two,
more in a tempo's surprises) fewer would be a bet, and no rate read from the past tells
which node the bet loses on.

The validator's reference plans on the forecast of the tempo's world from the published
past (:func:`reference_plan`, :mod:`subnets.forecast`): what any miner knows without
feedback. ``dagnet bench world``'s oracle plans on the world itself.
"""

from __future__ import annotations

from dataclasses import replace

from protocol.plan import ErrorPolicy
from protocol.synapse import TaskPackage
from subnets.forecast import Forecast
from subnets.world import World

from .base import PlanProposal
from .good import GoodPlanner

__all__ = ["RETRIES", "plan_in_world", "reference_plan", "with_retries"]

RETRIES = 10
"""What every node declares: ``ErrorPolicy``'s ceiling."""


def plan_in_world(package: TaskPackage, world: World, *, planner: GoodPlanner | None = None) -> PlanProposal:
    """``planner``'s (``good``'s, timed by counted steps only) plan of ``package`` on the
    profile ``world`` tells, each node declaring :data:`RETRIES`."""
    planner = planner or GoodPlanner(timed=False)
    proposal = planner.plan(package.model_copy(update={"available_tools": world.tools(package.available_tools)}))
    return with_retries(proposal)


def with_retries(proposal: PlanProposal, retries: int = RETRIES) -> PlanProposal:
    """``proposal`` with ``retries`` declared on every node (its timeouts kept)."""
    plan = proposal.plan
    policies = {
        node.id: plan.error_handling.get(node.id, ErrorPolicy()).model_copy(update={"retry_count": retries})
        for node in plan.nodes
    }
    return replace(proposal, plan=plan.model_copy(update={"error_handling": policies}))


def reference_plan(package: TaskPackage, prior: Forecast | None) -> PlanProposal:
    """The validator's reference: ``good`` (timed by counted steps only, so every validator
    gets the same plan) on the ``prior`` forecast of the tempo's world; on the advertised
    profile, as ``good`` plans it, when no world is played (``prior`` ``None``)."""
    if prior is None:
        return GoodPlanner(timed=False).plan(package)
    return plan_in_world(package, prior.expected)
