"""The learner: ``good``, planning on what the subnets did instead of what they advertise.

With a validator's forecast (``TaskPackage.forecast``: the tempo's world as that
validator's published past predicts it, which its reference plans on) the learner plans
on that forecast corrected by what the tempo's own runs reveal (:mod:`.tempo`): the bad
spells (a subnet more likely than not in one is planned as in one, every other one with
its chance of a spell weighed in), and each subnet's price, latency and failure rates
this tempo; every node declares 10 retries, as the reference's do. Having heard nothing
of the tempo, its plan is the reference's.

Without one (the advertised profile alone, as ``dagnet eval`` without ``--world`` sends),
it plans as follows.

A package's ``available_tools`` is each subnet's advertised profile, and a real subnet
is not its profile: its latency has a tail, its failures come and go, it has outages,
its price moves. Every feedback message (docs/protocol.md, "Feedback") says how this
miner's own nodes ran: per node the subnet and what it cost, per attempt how long it
took and whether it failed and why. The learner keeps per subnet decayed sums of those
(what a message ``half_life`` tempos older says counts half):

- the attempts that got an answer or an ordinary failure (``unavailable (attempt N)``,
  ``low-quality answer``), their failures, seconds and cost;
- the node runs, and how many of them met an *outage* (``unavailable: outage``): a
  window in which the subnet refuses every call at once, so a retry made in it is
  refused too and only another subnet helps.

Each rate is read with a prior: a subnet seen a few times is pulled towards what every
subnet did (the failure rate and outage rate over all of them), never below what its
profile advertises, with the weight of ``prior`` attempts or runs. So what the learner
saw of the world as a whole reaches the subnets it has not tried yet.

Before planning it rewrites the profile of every subnet of the package:

- ``avg_latency``, ``avg_cost``: the observed seconds and cost per attempt outside
  outages, once ``min_attempts`` (decayed) were seen (a failed attempt is not charged,
  so the cost per attempt times the attempts to expect is the price of a success);
- ``fail_first``: the failures to expect before a success, ``q / (1 - q)``, where ``q``
  is the chance that an attempt fails counting a run's outage in (``good`` weighs
  ``1 + fail_first`` attempts of cost and latency, so a subnet that fails or goes down
  often loses its steps to a steadier one).

A subnet that fails nearly always (``give_up``), or whose runs meet an outage often
(``avoid_outages``: a subnet in a bad spell this tempo, where no retry helps), is left
out while its kind has another subnet. Then ``good`` plans the rewritten package, and each node declares the retries its
subnet needs to succeed with probability ``success`` at its failure rate: retries cost
nothing unless they are needed (a failed attempt is not charged), and a node that fails
costs the step most of its score.

The miner keeps the feedback across restarts and replays it into :meth:`Learner.observe`
at start-up, so the learner itself keeps no files.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, replace

from planners import PLANNER_INTERFACE, GoodPlanner, PlanProposal
from planners.public import plan_in_world
from protocol.feedback import NodeFeedback, StepFeedback
from protocol.forecast import WorldForecast
from protocol.plan import ErrorPolicy, WorkflowPlan
from protocol.synapse import TaskPackage, ToolInfo
from subnets.forecast import forecast_world
from subnets.world import World

from .tempo import TempoEvidence, learned, refused, spell_chance

BLOCKS_PER_TEMPO = 360
"""The clock of a message that names no tempo: its block over this."""
PACKAGES_KEPT = 512
"""The most packages whose advertised profiles are kept to read their feedback against."""
MAX_FAIL_FIRST = 10  # ToolInfo's ceiling
MAX_RETRIES = 10  # ErrorPolicy's ceiling


@dataclass
class SubnetStats:
    """Decayed sums of what one subnet did, as of tempo ``clock``."""

    attempts: float = 0.0
    """Attempts outside outages."""
    failures: float = 0.0
    seconds: float = 0.0
    cost_tao: float = 0.0
    runs: float = 0.0
    """Node runs (one per node of a plan, frame instances each)."""
    outages: float = 0.0
    """Node runs that met an outage."""
    clock: float = 0.0

    def add(self, node: NodeFeedback, clock: float, half_life: float) -> None:
        """Count ``node``'s attempts, seen at tempo ``clock``: the older of the sums and the
        node is weighed down by ``0.5 ** (age / half_life)``."""
        if clock > self.clock:
            self._scale(0.5 ** ((clock - self.clock) / half_life))
            self.clock = clock
        weight = 0.5 ** ((self.clock - clock) / half_life)
        answered = [attempt for attempt in node.attempts if not refused(attempt.error)]
        self.attempts += weight * len(answered)
        self.failures += weight * sum(not attempt.ok for attempt in answered)
        self.seconds += weight * sum(attempt.latency_s for attempt in answered)
        self.cost_tao += weight * node.cost_tao
        self.runs += weight
        self.outages += weight * (len(answered) < len(node.attempts))

    def _scale(self, factor: float) -> None:
        for name in ("attempts", "failures", "seconds", "cost_tao", "runs", "outages"):
            setattr(self, name, getattr(self, name) * factor)

    def failure_rate(self, prior: float = 0.0, weight: float = 0.0) -> float:
        """The failure rate of an attempt outside outages, ``weight`` attempts of ``prior`` added."""
        return _rate(self.failures, self.attempts, prior, weight)

    def outage_rate(self, prior: float = 0.0, weight: float = 0.0) -> float:
        """The chance that a node run meets an outage, ``weight`` runs of ``prior`` added."""
        return _rate(self.outages, self.runs, prior, weight)


def _rate(hits: float, count: float, prior: float, weight: float) -> float:
    return (hits + prior * weight) / (count + weight) if count + weight > 0 else prior


def retries_for(rate: float, success: float) -> int:
    """The retries a node needs to succeed with probability ``success`` when each attempt
    fails with probability ``rate``."""
    if rate <= 0:
        return 0
    if rate >= 1 or success >= 1:
        return MAX_RETRIES
    return min(MAX_RETRIES, max(0, math.ceil(math.log(1 - success) / math.log(rate)) - 1))


def expected_failures(rate: float) -> int:
    """The failures to expect before a success, ``rate / (1 - rate)``, as a profile's ``fail_first``."""
    return MAX_FAIL_FIRST if rate >= 1 else min(MAX_FAIL_FIRST, round(rate / (1 - rate)))


def advertised_rate(info: ToolInfo) -> float:
    """The failure rate a profile advertises: its first ``fail_first`` attempts fail."""
    return info.fail_first / (1 + info.fail_first)


class Learner:
    """``good`` on learned subnet profiles, with the retries learned failures need (see the module)."""

    name = "learner"
    interface = PLANNER_INTERFACE

    def __init__(
        self,
        *,
        half_life: float = 0.5,
        min_attempts: float = 3.0,
        prior: float = 3.0,
        give_up: float = 0.9,
        avoid_outages: float = 0.25,
        success: float = 1.0,
        spell_belief: float = 0.5,
        **good: object,
    ) -> None:
        """``half_life`` in tempos; a subnet's latency and cost are rewritten once
        ``min_attempts`` (decayed) were seen; its rates are pulled towards every subnet's
        with the weight of ``prior`` attempts; ``give_up`` is the failure rate and
        ``avoid_outages`` the outage rate past which it is left out; each node declares the retries its subnet needs to succeed with
        probability ``success`` (1: the most a plan may declare, 10, on every node of a
        subnet that ever fails; a failed attempt is free). With a validator's forecast, a
        subnet whose chance of a spell is over ``spell_belief`` is planned as in one.
        Other options go to ``good``."""
        self.half_life = half_life
        self.min_attempts = min_attempts
        self.prior = prior
        self.give_up = give_up
        self.avoid_outages = avoid_outages
        self.success = success
        self.spell_belief = spell_belief
        self.good = GoodPlanner(**good)
        self.stats: dict[str, SubnetStats] = {}
        self.tempo = TempoEvidence()
        self.packages: dict[str, dict[str, ToolInfo]] = {}
        """The advertised profiles of the packages planned on a forecast, by task id (the
        latest :data:`PACKAGES_KEPT`): what the feedback on them is priced and timed against."""
        self._lock = threading.Lock()  # observe and plan run in different threads

    def observe(self, feedback: StepFeedback) -> None:
        """Count every attempt of every node in ``feedback``."""
        clock = feedback.tempo if feedback.tempo is not None else feedback.block / BLOCKS_PER_TEMPO
        framed = {node.node_id for node in feedback.nodes if node.frame is not None}
        # a framed node's own record sums its frames, which are counted one by one
        runs = [n for n in feedback.nodes if n.attempts and not (n.frame is None and n.node_id in framed)]
        with self._lock:
            for node in runs:
                self.stats.setdefault(node.subnet, SubnetStats()).add(node, clock, self.half_life)
            self.tempo.add(feedback, runs, self.packages.get(feedback.task_id, {}))

    def plan(self, package: TaskPackage) -> PlanProposal:
        if package.forecast is not None:
            with self._lock:
                self.packages[package.task_id] = dict(package.available_tools)
                while len(self.packages) > PACKAGES_KEPT:
                    del self.packages[next(iter(self.packages))]
            return plan_in_world(package, self.forecast_world(package.forecast), planner=self.good)
        with self._lock:
            rates = self._rates(package)
            relearned = self._relearned(package, rates)
        proposal = self.good.plan(relearned)
        return replace(proposal, plan=self._with_retries(proposal.plan, rates))

    def forecast_world(self, sent: WorldForecast) -> World:
        """The validator's forecast ``sent`` as this tempo's runs correct it: a subnet more
        likely than not in a spell planned as in one, every other one with its chance of a
        spell weighed in, and each one's price, latency and failures moved towards what its
        runs showed (:mod:`.tempo`)."""
        with self._lock:
            seen = {name: replace(tally) for name, tally in self.tempo.of(sent.validator, sent.tempo).items()}
        chances, fields = {}, {}
        for name, tally in seen.items():
            told = sent.subnets.get(name)
            if told is not None:
                chance = spell_chance(sent.spell_p, told.outage_p, tally)
                chances[name] = 1.0 if chance > self.spell_belief else chance
                fields[name] = learned(told, tally, chances[name])
        return forecast_world(sent, chances, fields)

    def relearned(self, package: TaskPackage) -> TaskPackage:
        """``package`` with every subnet's profile as learned (see the module)."""
        with self._lock:
            return self._relearned(package, self._rates(package))

    def _rates(self, package: TaskPackage) -> dict[str, tuple[float, float]]:
        """Per subnet of ``package``: its attempt failure rate and its run outage rate, each
        pulled towards every subnet's (never below the advertised failure rate)."""
        seen = list(self.stats.values())
        if not seen:
            return {}
        every = SubnetStats(
            attempts=sum(s.attempts for s in seen),
            failures=sum(s.failures for s in seen),
            runs=sum(s.runs for s in seen),
            outages=sum(s.outages for s in seen),
        )
        failing, down = every.failure_rate(), every.outage_rate()
        rates = {}
        for subnet, info in package.available_tools.items():
            stats = self.stats.get(subnet, SubnetStats())
            prior = max(failing, advertised_rate(info))
            rates[subnet] = (stats.failure_rate(prior, self.prior), stats.outage_rate(down, self.prior))
        return rates

    def _relearned(self, package: TaskPackage, rates: dict[str, tuple[float, float]]) -> TaskPackage:
        allowed = package.constraints.allowed_subnets
        tools = dict(package.available_tools)
        for subnet, advertised in package.available_tools.items():
            if subnet not in rates:
                continue
            failing, down = rates[subnet]
            shunned = failing >= self.give_up or down >= self.avoid_outages
            if shunned and _another_of_kind(tools, subnet, advertised.type, allowed):
                del tools[subnet]
                continue
            update: dict[str, float | int] = {"fail_first": expected_failures(_either(failing, down))}
            stats = self.stats.get(subnet)
            if stats is not None and stats.attempts >= self.min_attempts:
                update |= {"avg_latency": stats.seconds / stats.attempts, "avg_cost": stats.cost_tao / stats.attempts}
            tools[subnet] = advertised.model_copy(update=update)
        return package.model_copy(update={"available_tools": tools})

    def _with_retries(self, plan: WorkflowPlan, rates: dict[str, tuple[float, float]]) -> WorkflowPlan:
        policies = dict(plan.error_handling)
        for node in plan.nodes:
            if node.subnet not in rates:
                continue
            policy = policies.get(node.id, ErrorPolicy())
            retries = max(policy.retry_count, retries_for(_either(*rates[node.subnet]), self.success))
            policies[node.id] = policy.model_copy(update={"retry_count": retries})
        return plan.model_copy(update={"error_handling": policies})


def _either(failing: float, down: float) -> float:
    """The chance that an attempt fails, or meets the run's outage."""
    return 1 - (1 - failing) * (1 - down)


def _another_of_kind(tools: dict[str, ToolInfo], subnet: str, kind: str, allowed: list[str] | None) -> bool:
    return any(
        other != subnet and info.type == kind and (allowed is None or other in allowed) for other, info in tools.items()
    )
