"""The good reference strategy: parallel where independent, and each step on the
subnet that costs the score least.

- Edges exactly where a step's params reference another step, so independent
  steps run concurrently under a dependency-driven executor.
- Subnets are chosen for the score the validator pays (docs/scoring.md): ``W_COST``
  per share of the budget spent and ``W_LATENCY`` per share of the latency limit
  taken. A step on a subnet known to fail its first ``fail_first`` attempts costs and
  takes ``1 + fail_first`` attempts; ``top_k`` providers cost ``top_k`` times as much.
  A local search starts from the cheapest subnets and from the fastest, and moves a
  step, the steps of a kind in one tier, or all the steps of a kind to another subnet
  while that lowers the expected loss. The plan must stay within the budget and under
  a latency cap (``latency_headroom`` of ``max_latency_seconds``): estimates are
  averages, and the validator's scheduling and the network add to them.
- Every node declares ``retry_count = fail_first + 1`` (one spare for transient
  faults) and a per-attempt timeout of a few times its subnet's latency plus a
  margin for the action's own work, so a hung provider is cut off long before the
  validator's default.
- The steps come from the package at the ``full`` tier; at ``outline`` and ``goal``
  they are found by search over the action catalogue against the public examples
  (:mod:`planners.synth`). At ``full`` the search runs too (unless
  ``shorter=False``), and a found program with fewer steps replaces the hinted one when
  it is also cheaper by this planner's own estimate and gives what the hints give on
  fresh inputs made from the examples (``synth.agrees_with_hints``: each example with its
  lists reversed, or one input from another example); a program that fits three
  examples by chance is not taken over the hints (hints with ``python_exec``, which
  the miner never runs, are not compared: there the examples alone judge).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from protocol.graph import CycleError, Graph
from protocol.plan import ErrorPolicy, WorkflowPlan
from protocol.score_weights import W_COST, W_LATENCY
from protocol.synapse import StepHint, TaskPackage

from .base import PlanningError, PlanProposal, estimate
from .steps import Option, Placement, compile_plan, options, read_steps, step_graph
from .synth import CPU_BUDGET_S, SEARCH_CHECKS, WALL_BUDGET_S, agrees_with_hints, synthesise

_SPARE_RETRIES = 1
_MAX_RETRIES = 10  # ErrorPolicy's ceiling
_TIMEOUT_FACTOR = 3.0
_TIMEOUT_MARGIN_S = 2.0
# Actions whose own work dominates the subnet's latency: python_exec starts a
# sandboxed interpreter, bounded by the sandbox's 10 s wall limit.
_ACTION_MARGIN_S = {"python_exec": 10.0}
# With the hints in hand the search is only for a shorter program, which is found fast
# when there is one; a short allowance keeps full-tier planning quick. The checks bind
# first on a machine that is not starved, so a miner's plan is the validator's.
_SHORTER_CHECKS = 1_000
_SHORTER_CPU_S = 0.5
_SHORTER_WALL_S = 0.8
_REASONING_NODES = 32  # keeps the reasoning far below the 16 KiB wire limit


class GoodPlanner:
    name = "good"

    def __init__(self, *, latency_headroom: float = 0.8, shorter: bool = True, timed: bool = True) -> None:
        """``timed=False`` searches by counted steps only, with no CPU or wall cap, so the
        plan is the same on every machine: how a validator runs its reference."""
        if not 0 < latency_headroom <= 1:
            raise ValueError("latency_headroom must be in (0, 1]")
        self.latency_headroom = latency_headroom
        self.shorter = shorter
        self.timed = timed

    def _search(self, package: TaskPackage, *, shorter: bool = False) -> list[StepHint]:
        if shorter:
            checks, cpu_s, wall_s = _SHORTER_CHECKS, _SHORTER_CPU_S, _SHORTER_WALL_S
        else:
            checks, cpu_s, wall_s = SEARCH_CHECKS, CPU_BUDGET_S, WALL_BUDGET_S
        if not self.timed:
            cpu_s = wall_s = math.inf
        return synthesise(package, checks=checks, cpu_s=cpu_s, wall_s=wall_s)

    def plan(self, package: TaskPackage) -> PlanProposal:
        """The plan of the hinted steps or of the steps found by search, whichever this
        planner expects to score better (only found steps below the ``full`` tier)."""
        if package.hint_tier != "full":
            return self._place(package.model_copy(update={"steps": self._search(package)}), "found by search")
        if not package.steps:
            try:
                steps = self._search(package)
            except PlanningError as exc:
                raise PlanningError(f"task has no steps, and the search found none: {exc}") from None
            return self._place(package.model_copy(update={"steps": steps}), "found by search")
        hinted = self._place(package, "as hinted")
        if not self.shorter:
            return hinted
        try:
            steps = self._search(package, shorter=True)
        except PlanningError:
            return hinted
        if len(steps) >= len(package.steps):
            return hinted
        found = self._place(package.model_copy(update={"steps": steps}), "found by search")
        if self._key(found, package) < self._key(hinted, package) and agrees_with_hints(package, steps):
            return found
        return hinted

    def _key(self, proposal: PlanProposal, package: TaskPackage) -> tuple[float, float, float]:
        limit = package.constraints.max_latency_seconds
        limits = _Limits(package.constraints.max_budget_tao or math.inf, limit, limit * self.latency_headroom)
        return limits.key(proposal.total_estimated_cost, proposal.total_estimated_latency)

    def _place(self, package: TaskPackage, origin: str) -> PlanProposal:
        """``package``'s steps, each on the subnet that costs the score least."""
        steps = package.steps
        edges = [(src, step.id) for step, srcs in zip(steps, read_steps(package)) for src in srcs]
        graph = step_graph(package, edges)
        try:
            graph.topo_order()
        except CycleError as exc:
            raise PlanningError(f"step DataRefs form a {exc}") from None
        ranked = [sorted(options(package, step), key=_price) for step in steps]
        limit = package.constraints.max_latency_seconds
        cap = limit * self.latency_headroom
        chosen = _choose(graph, ranked, _Limits(package.constraints.max_budget_tao or math.inf, limit, cap))
        placements = [
            Placement(step, opt, _attempts(opt), _policy(step.action, opt)) for step, opt in zip(steps, chosen)
        ]
        width = _parallel_width(graph, [opt.latency(_attempts(opt)) for opt in chosen])
        plan = compile_plan(package, placements, chain=False, max_parallel=width)
        cost, latency = estimate(plan)
        return PlanProposal(
            plan=plan,
            total_estimated_cost=cost,
            total_estimated_latency=latency,
            confidence=_confidence(cost, latency, package, cap),
            reasoning=f"steps {origin}; " + _reasoning(plan, graph, cost, latency, cap),
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


def _choose(graph: Graph, ranked: list[list[Option]], limits: _Limits) -> list[Option]:
    """The options with the least expected loss of score (:meth:`_Limits.key`): a local
    search from the cheapest options and one from the fastest, the better of the two."""
    search = _Search(graph, ranked, limits)
    cheapest = tuple(0 for _ in ranked)
    fastest = tuple(min(range(len(opts)), key=lambda k: _speed(opts[k])) for opts in ranked)  # min() calls it at once
    best = min((search.descend(start) for start in (cheapest, fastest)), key=search.key)
    return [opts[k] for opts, k in zip(ranked, best)]


class _Search:
    """One option per step, written as its index in the step's ranked options (steps of
    a kind share one ranking, so an index means the same subnet for all of them)."""

    def __init__(self, graph: Graph, ranked: list[list[Option]], limits: _Limits) -> None:
        self.graph, self.limits = graph, limits
        self.costs = [[opt.cost(_attempts(opt)) for opt in opts] for opts in ranked]
        self.latencies = [[opt.latency(_attempts(opt)) for opt in opts] for opts in ranked]
        self.groups = _groups(graph, ranked)

    def key(self, choice: tuple[int, ...]) -> tuple[float, float, float]:
        try:
            cost = math.fsum(costs[k] for costs, k in zip(self.costs, choice))
        except OverflowError:  # prices near the float limit (a package may say anything): dearer than any
            cost = math.inf
        return self.limits.key(cost, self.graph.critical_path(self._latencies(choice)))

    def _latencies(self, choice: tuple[int, ...]) -> list[float]:
        return [latencies[k] for latencies, k in zip(self.latencies, choice)]

    def _may_help(self, choice: tuple[int, ...], group: list[int], k: int, on_path: set[int]) -> bool:
        """Whether moving ``group`` to option ``k`` can lower the key: it saves cost
        somewhere, or it speeds up a step on the critical path (nothing else shortens it)."""
        return any(
            self.costs[step][k] < self.costs[step][choice[step]]
            or (step in on_path and self.latencies[step][k] < self.latencies[step][choice[step]])
            for step in group
        )

    def descend(self, choice: tuple[int, ...]) -> tuple[int, ...]:
        """While putting some group of steps on one option lowers the key, make the move
        that lowers it most. Every move strictly lowers the key and there are finitely
        many choices, so the search ends."""
        best = self.key(choice)
        while True:
            found = None
            on_path = set(self.graph.longest_path(self._latencies(choice))[1])
            for group in self.groups:
                for k in range(len(self.costs[group[0]])):
                    if all(choice[step] == k for step in group) or not self._may_help(choice, group, k, on_path):
                        continue
                    candidate = list(choice)
                    for step in group:
                        candidate[step] = k
                    key = self.key(tuple(candidate))
                    if key < best:
                        found, best = tuple(candidate), key
            if found is None:
                return choice
            choice = found


def _groups(graph: Graph, ranked: list[list[Option]]) -> list[list[int]]:
    """Steps that a move puts on one option together: each step alone, the steps of a
    kind in one tier (parallel branches only shorten the critical path together), and
    all the steps of a kind."""
    level = {graph.index[node_id]: depth for depth, tier in enumerate(graph.tiers()) for node_id in tier}
    by_tier: dict[tuple[str, int], list[int]] = {}
    by_kind: dict[str, list[int]] = {}
    for step, opts in enumerate(ranked):
        by_tier.setdefault((opts[0].info.type, level[step]), []).append(step)
        by_kind.setdefault(opts[0].info.type, []).append(step)
    shared = [tuple(group) for group in [*by_tier.values(), *by_kind.values()] if len(group) > 1]
    return [[step] for step in range(len(ranked))] + [list(group) for group in dict.fromkeys(shared)]


def _speed(option: Option) -> tuple[float, float, int]:
    attempts = _attempts(option)
    return (option.latency(attempts), option.cost(attempts), option.position)


@dataclass(frozen=True, slots=True)
class _Limits:
    """What the validator pays for: ``W_COST`` per budget spent, ``W_LATENCY`` per
    latency limit taken (docs/scoring.md); ``cap`` is the latency the plan must stay
    under and ``budget`` the spend (``inf`` when the task gives none)."""

    budget: float
    latency_limit: float
    cap: float

    def key(self, cost: float, latency: float) -> tuple[float, float, float]:
        """``(excess over the cap and the budget, expected loss of S, cost)``, smaller is better."""
        excess = max(0.0, latency - self.cap) / self.latency_limit
        loss = W_LATENCY * latency / self.latency_limit
        if math.isfinite(self.budget):
            excess += max(0.0, cost - self.budget) / self.budget
            loss += W_COST * cost / self.budget
        return (excess, loss, cost)


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


def _confidence(cost: float, latency: float, package: TaskPackage, cap: float) -> float:
    budget = package.constraints.max_budget_tao
    if budget is not None and cost > budget:
        return 0.3
    if latency > package.constraints.max_latency_seconds:
        return 0.4
    return 0.9 if latency <= cap else 0.7


def _reasoning(plan: WorkflowPlan, graph: Graph, cost: float, latency: float, cap: float) -> str:
    choices = ", ".join(f"{node.id}->{node.subnet}" for node in plan.nodes[:_REASONING_NODES])
    if len(plan.nodes) > _REASONING_NODES:
        choices += f", ... ({len(plan.nodes) - _REASONING_NODES} more)"
    return (
        f"{len(plan.nodes)} nodes, {len(plan.edges)} edges from DataRefs, "
        f"{len(graph.tiers())} tiers, up to {plan.max_parallel} in parallel; "
        f"critical path {latency:.3f}s (cap {cap:.3f}s); "
        f"estimated cost {cost:.6g} TAO with retries for known "
        f"flaky subnets; subnets weighed by cost and latency: {choices}"
    )
