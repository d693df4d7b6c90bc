"""The good reference strategy: parallel where independent, cheap where it fits.

- Edges exactly where a step's params reference another step, so independent
  steps run concurrently under a dependency-driven executor.
- Each step starts on its cheapest allowed subnet of the right kind, priced for
  the attempts it will need (a subnet known to fail its first ``fail_first``
  attempts costs and takes ``1 + fail_first`` attempts). While the critical path
  misses the latency target, the step on it with the best latency saved per TAO
  moves to a faster subnet, as long as the total stays within the budget. When no
  move is left the critical path already runs on the fastest options it can afford.
- Every node declares ``retry_count = fail_first + 1`` (one spare for transient
  faults) and a per-attempt timeout of a few times its subnet's latency plus a
  margin for the action's own work, so a hung provider is cut off long before the
  validator's default.

The latency target is a fraction (``latency_headroom``) of ``max_latency_seconds``:
estimates are averages, and the validator's scheduling and the network add to them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from protocol.graph import CycleError, Graph
from protocol.plan import Edge, ErrorPolicy, WorkflowPlan
from protocol.synapse import TaskPackage

from .base import PlanningError, PlanProposal
from .steps import Option, estimate, options, plan_node, read_steps, step_graph

_SPARE_RETRIES = 1
_MAX_RETRIES = 10  # ErrorPolicy's ceiling
_TIMEOUT_FACTOR = 3.0
_TIMEOUT_MARGIN_S = 2.0
# Actions whose own work dominates the subnet's latency: python_exec starts a
# sandboxed interpreter, bounded by the sandbox's 10 s wall limit.
_ACTION_MARGIN_S = {"python_exec": 10.0}
_REASONING_NODES = 32  # keeps the reasoning far below the 16 KiB wire limit


class GoodPlanner:
    name = "good"

    def __init__(self, *, latency_headroom: float = 0.5) -> None:
        if not 0 < latency_headroom <= 1:
            raise ValueError("latency_headroom must be in (0, 1]")
        self.latency_headroom = latency_headroom

    def plan(self, package: TaskPackage) -> PlanProposal:
        steps = package.steps
        edges = [(src, step.id) for step, srcs in zip(steps, read_steps(package)) for src in srcs]
        graph = step_graph(package, edges)
        try:
            graph.topo_order()
        except CycleError as exc:
            raise PlanningError(f"step DataRefs form a {exc}") from None
        ranked = [sorted(options(package, step), key=_price) for step in steps]
        target = package.constraints.max_latency_seconds * self.latency_headroom
        budget = package.constraints.max_budget_tao or math.inf
        chosen = _cheapest_fitting(graph, ranked, target, budget)
        nodes = [plan_node(step, opt, _attempts(opt)) for step, opt in zip(steps, chosen)]
        latencies = [node.estimated_latency for node in nodes]
        plan = WorkflowPlan(
            nodes=nodes,
            edges=[Edge(source=a, to=b) for a, b in edges],
            error_handling={step.id: _policy(step.action, opt) for step, opt in zip(steps, chosen)},
            output_node=steps[-1].id,
            max_parallel=_parallel_width(graph, latencies),
        )
        cost, latency = estimate(plan, graph)
        return PlanProposal(
            plan=plan,
            total_estimated_cost=cost,
            total_estimated_latency=latency,
            confidence=_confidence(cost, latency, package, target),
            reasoning=_reasoning(plan, graph, cost, latency, target),
        )


def _attempts(option: Option) -> int:
    """Attempts a node on ``option`` is expected to make: the known failures, then one."""
    return 1 + option.info.fail_first


def _price(option: Option) -> tuple[float, float, int]:
    attempts = _attempts(option)
    return (option.cost(attempts), option.latency(attempts), option.position)


def _policy(action: str, option: Option) -> ErrorPolicy:
    margin = _ACTION_MARGIN_S.get(action, _TIMEOUT_MARGIN_S)
    return ErrorPolicy(
        retry_count=min(_MAX_RETRIES, option.info.fail_first + _SPARE_RETRIES),
        timeout_seconds=min(3600.0, _TIMEOUT_FACTOR * option.info.avg_latency + margin),
    )


def _cheapest_fitting(
    graph: Graph, ranked: list[list[Option]], target: float, budget: float
) -> list[Option]:
    """Cheapest options, upgraded along the critical path until it meets ``target``.

    Every upgrade strictly lowers one step's latency, so the loop ends after at
    most as many upgrades as there are options.
    """
    chosen = [opts[0] for opts in ranked]
    while True:
        length, path = graph.longest_path([opt.latency(_attempts(opt)) for opt in chosen])
        if length <= target:
            return chosen
        spare = budget - sum(opt.cost(_attempts(opt)) for opt in chosen)
        upgrade = _best_upgrade(path, chosen, ranked, spare)
        if upgrade is None:
            return chosen
        step, option = upgrade
        chosen[step] = option


def _best_upgrade(
    path: Sequence[int], chosen: list[Option], ranked: list[list[Option]], spare: float
) -> tuple[int, Option] | None:
    """The (step, faster option) on ``path`` saving the most latency per extra TAO."""
    best: tuple[int, Option] | None = None
    best_key = (-1.0, -1.0)
    for step in path:
        current = chosen[step]
        now_latency, now_cost = current.latency(_attempts(current)), current.cost(_attempts(current))
        for option in ranked[step]:
            saved = now_latency - option.latency(_attempts(option))
            extra = option.cost(_attempts(option)) - now_cost
            if not (saved > 0 and extra <= spare):  # also false for NaN from overflowing estimates
                continue
            key = (saved / extra if extra > 0 else math.inf, saved)
            if key > best_key:
                best, best_key = (step, option), key
    return best


def _parallel_width(graph: Graph, durations: Sequence[float]) -> int:
    """How many nodes may run at once: the widest Kahn tier, or the peak overlap of
    the as-soon-as-possible schedule by estimated latency, whichever is larger."""
    finish = [0.0] * len(durations)
    events: list[tuple[float, int]] = []
    for v in graph.topo_order():
        start = max((finish[p] for p in graph.preds[v]), default=0.0)
        finish[v] = start + durations[v]
        if durations[v] > 0:
            events += [(start, 1), (finish[v], -1)]  # at equal times, ends sort first
    running = peak = 0
    for _, delta in sorted(events):
        running += delta
        peak = max(peak, running)
    return max(peak, max(len(tier) for tier in graph.tiers()))


def _confidence(cost: float, latency: float, package: TaskPackage, target: float) -> float:
    budget = package.constraints.max_budget_tao
    if budget is not None and cost > budget:
        return 0.3
    if latency > package.constraints.max_latency_seconds:
        return 0.4
    return 0.9 if latency <= target else 0.7


def _reasoning(plan: WorkflowPlan, graph: Graph, cost: float, latency: float, target: float) -> str:
    choices = ", ".join(f"{node.id}->{node.subnet}" for node in plan.nodes[:_REASONING_NODES])
    if len(plan.nodes) > _REASONING_NODES:
        choices += f", ... ({len(plan.nodes) - _REASONING_NODES} more)"
    return (
        f"{len(plan.nodes)} nodes, {len(plan.edges)} edges from DataRefs, "
        f"{len(graph.tiers())} tiers, up to {plan.max_parallel} in parallel; "
        f"critical path {latency:.3f}s (target {target:.3f}s); "
        f"estimated cost {cost:.6g} TAO with retries for known "
        f"flaky subnets; cheapest subnet that fits: {choices}"
    )
