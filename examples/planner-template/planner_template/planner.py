"""The template planner: every step hint as one node, on the cheapest allowed subnet of
its kind that is fast enough, wired by the plan builder (``protocol/builder.py``, docs/plan-builder.md).

It plans only packages sent at the ``full`` hint tier (docs/tasks.md, "Hint tiers"): an
``outline`` package's steps have no params and a ``goal`` package has none, so it says
it cannot plan them (a validator sends four packages in five at those tiers: they earn
nothing until the planner finds plans itself, as the reference ``good`` does by search
over the action catalogue checked against the public examples, planners/synth/).

Where to improve it: planning outline and goal packages, the choice of subnet (cost
against latency, docs/scoring.md), the retries and timeouts each node declares, or
plans that ignore the hints altogether.
"""

from __future__ import annotations

from planners import PLANNER_INTERFACE, PlanningError, PlanProposal
from protocol.builder import END, BuildError, graph, tool
from protocol.synapse import StepHint, TaskPackage, ToolInfo


class TemplatePlanner:
    name = "template"
    interface = PLANNER_INTERFACE

    def __init__(self, *, spare_retries: int = 1, timeout_factor: float = 3.0) -> None:
        """Options come from the miner's ``[planner.options]`` (``--set planner.options.spare_retries=0``)."""
        self.spare_retries = spare_retries
        self.timeout_factor = timeout_factor

    def plan(self, package: TaskPackage) -> PlanProposal:
        if package.hint_tier != "full" or not package.steps:
            raise PlanningError(
                f"the template follows full step hints only; this package is at the {package.hint_tier} tier"
            )
        chosen = {step.id: self._subnet(package, step) for step in package.steps}

        @graph(inputs=package.inputs)
        def answer() -> None:
            ops = [self._op(step, *chosen[step.id]) for step in package.steps]
            ops[-1] >> END  # the last hint's output is the answer; references order the rest

        try:
            plan = answer.compile()
        except BuildError as exc:
            raise PlanningError(str(exc)) from None
        cost = sum(n.estimated_cost for n in plan.nodes)
        latency = sum(n.estimated_latency for n in plan.nodes)  # an upper bound: parallel steps overlap
        return PlanProposal(plan, cost, latency, 0.6, f"{len(plan.nodes)} hinted steps, cheapest fast-enough subnets")

    def _op(self, step: StepHint, subnet: str, info: ToolInfo):
        """One node: the hint's action and params (their ``${...}`` refs kept as written),
        with the retries the subnet's known failures need and a timeout."""
        make = tool(step.action, subnet=subnet)
        return make(
            id=step.id,
            **step.params,
            retry_count=info.fail_first + self.spare_retries,
            timeout_seconds=round(self.timeout_factor * info.avg_latency + 2.0, 3),
            estimated_cost=info.avg_cost * _attempts(info),
            estimated_latency=info.avg_latency * _attempts(info),
        )

    @staticmethod
    def _subnet(package: TaskPackage, step: StepHint) -> tuple[str, ToolInfo]:
        """The cheapest allowed subnet of the step's kind that is fast enough for an even
        share of the latency limit; the fastest one when none is."""
        allowed = package.constraints.allowed_subnets
        offers = [
            (subnet, info)
            for subnet, info in package.available_tools.items()
            if info.type == step.kind and (allowed is None or subnet in allowed)
        ]
        if not offers:
            raise PlanningError(f"step {step.id!r}: no allowed subnet of kind {step.kind!r}")
        share = 0.8 * package.constraints.max_latency_seconds / len(package.steps)
        fast = [offer for offer in offers if _attempts(offer[1]) * offer[1].avg_latency <= share]
        if not fast:
            return min(offers, key=lambda offer: _attempts(offer[1]) * offer[1].avg_latency)
        return min(fast, key=lambda offer: _attempts(offer[1]) * offer[1].avg_cost)


def _attempts(info: ToolInfo) -> int:
    """The attempts a node on this subnet makes: its known failures, then one."""
    return 1 + info.fail_first
