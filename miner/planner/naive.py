"""The naive reference strategy: what a plan looks like when nothing is optimised.

Every step in the listed order, one after the other (edges ``i -> i+1``), each on
the first allowed subnet of its kind in the task's listing, with no retries and no
timeouts declared. The plan is valid and completes whenever the listed subnets
answer first time and the steps are listed in dependency order (every DataRef
names an earlier step); it simply leaves latency, cost and flakiness on the table,
which is what a local network needs to show the incentive working.
"""

from __future__ import annotations

from protocol.plan import Edge, WorkflowPlan
from protocol.synapse import TaskPackage

from .base import PlanProposal
from .steps import estimate, options, plan_node, read_steps, step_graph

_CONFIDENCE = 0.5


class NaivePlanner:
    name = "naive"

    def plan(self, package: TaskPackage) -> PlanProposal:
        read_steps(package)  # same input checks as every strategy
        steps = package.steps
        nodes = [plan_node(step, options(package, step)[0], attempts=1) for step in steps]
        chain = [(a.id, b.id) for a, b in zip(steps, steps[1:])]
        plan = WorkflowPlan(
            nodes=nodes,
            edges=[Edge(source=a, to=b) for a, b in chain],
            output_node=steps[-1].id,
        )
        reasoning = (
            f"sequential chain of {len(nodes)} steps in the listed order; "
            "first allowed subnet of each kind; no retries or timeouts declared"
        )
        cost, latency = estimate(plan, step_graph(package, chain))
        return PlanProposal(plan, cost, latency, _CONFIDENCE, reasoning)
