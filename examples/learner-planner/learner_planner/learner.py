"""The learner: ``good``, planning on what the subnets did instead of what they advertise.

A package's ``available_tools`` is each subnet's advertised profile, and a real subnet
is not its profile: its latency has a tail, its failures come and go, its price moves.
Every feedback message (docs/protocol.md, "Feedback") says how this miner's own nodes
ran: per node the subnet and what it cost, per attempt how long it took and whether it
failed. The learner keeps per subnet decayed sums of those (what a message
``half_life`` tempos older says counts half) and, before planning, rewrites the profile
of each subnet it has seen enough of:

- ``avg_latency``: the observed seconds per attempt;
- ``avg_cost``: the observed cost per attempt;
- ``fail_first``: the failures to expect before a success, ``p / (1 - p)`` for an
  observed per-attempt failure rate ``p`` (``good`` then declares one retry more).

A subnet whose attempts nearly all fail (``give_up``) is left out while its kind has
another subnet. Then ``good`` plans the rewritten package as usual, and each node on a
subnet seen enough declares the retries that subnet needs to succeed 99 times in 100
(``success``) at its observed failure rate: ``good`` declares one spare retry past
``fail_first``, which a subnet failing one attempt in three does not always cover.
Outages and low-quality answers come back as failed attempts, so they count in the rate. What is not seen
again fades: once a subnet's decayed attempts fall below ``min_attempts`` its advertised
profile is back, so a subnet left out during an outage is tried again.

The miner keeps the feedback across restarts and replays it into :meth:`Learner.observe`
at start-up, so the learner itself keeps no files.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, replace

from miner.planner import PLANNER_INTERFACE, GoodPlanner, PlanProposal
from protocol.feedback import NodeFeedback, StepFeedback
from protocol.plan import ErrorPolicy, WorkflowPlan
from protocol.synapse import TaskPackage, ToolInfo

BLOCKS_PER_TEMPO = 360
"""The clock of a message that names no tempo: its block over this."""
MAX_FAIL_FIRST = 10  # ToolInfo's ceiling
MAX_RETRIES = 10  # ErrorPolicy's ceiling


@dataclass
class SubnetStats:
    """Decayed sums of what one subnet did, as of tempo ``clock``."""

    attempts: float = 0.0
    failures: float = 0.0
    seconds: float = 0.0
    cost_tao: float = 0.0
    clock: float = 0.0

    def add(self, node: NodeFeedback, clock: float, half_life: float) -> None:
        """Count ``node``'s attempts, seen at tempo ``clock``: the older of the sums and the
        node is weighed down by ``0.5 ** (age / half_life)``."""
        if clock > self.clock:
            self._scale(0.5 ** ((clock - self.clock) / half_life))
            self.clock = clock
        weight = 0.5 ** ((self.clock - clock) / half_life)
        self.attempts += weight * len(node.attempts)
        self.failures += weight * sum(not attempt.ok for attempt in node.attempts)
        self.seconds += weight * sum(attempt.latency_s for attempt in node.attempts)
        self.cost_tao += weight * node.cost_tao

    def _scale(self, factor: float) -> None:
        self.attempts *= factor
        self.failures *= factor
        self.seconds *= factor
        self.cost_tao *= factor

    @property
    def failure_rate(self) -> float:
        return self.failures / self.attempts

    def retries(self, success: float) -> int:
        """The retries a node needs to succeed with probability ``success`` when each
        attempt fails at the observed rate."""
        rate = self.failure_rate
        if rate <= 0:
            return 0
        if rate >= 1:
            return MAX_RETRIES
        return min(MAX_RETRIES, max(0, math.ceil(math.log(1 - success) / math.log(rate)) - 1))

    def profile(self, advertised: ToolInfo) -> ToolInfo:
        """``advertised`` with what was observed in its place."""
        rate = self.failure_rate
        expected_failures = MAX_FAIL_FIRST if rate >= 1 else min(MAX_FAIL_FIRST, round(rate / (1 - rate)))
        return advertised.model_copy(update={
            "avg_latency": self.seconds / self.attempts,
            "avg_cost": self.cost_tao / self.attempts,
            "fail_first": expected_failures,
        })


class Learner:
    """``good`` on learned subnet profiles (see the module)."""

    name = "learner"
    interface = PLANNER_INTERFACE

    def __init__(
        self, *, half_life: float = 2.0, min_attempts: float = 3.0, give_up: float = 0.9, success: float = 0.99,
        **good: object,
    ) -> None:
        """``half_life`` in tempos; a subnet's profile is rewritten once ``min_attempts``
        (decayed) were seen; ``give_up`` is the failure rate past which it is left out;
        each node declares the retries its subnet needs to succeed with probability
        ``success``. Other options go to ``good``."""
        self.half_life = half_life
        self.min_attempts = min_attempts
        self.give_up = give_up
        self.success = success
        self.good = GoodPlanner(**good)
        self.stats: dict[str, SubnetStats] = {}
        self._lock = threading.Lock()  # observe and plan run in different threads

    def observe(self, feedback: StepFeedback) -> None:
        """Count every attempt of every node in ``feedback``."""
        clock = feedback.tempo if feedback.tempo is not None else feedback.block / BLOCKS_PER_TEMPO
        framed = {node.node_id for node in feedback.nodes if node.frame is not None}
        with self._lock:
            for node in feedback.nodes:
                if node.frame is None and node.node_id in framed:
                    continue  # a framed node's own record sums its frames, which are counted one by one
                if node.attempts:
                    self.stats.setdefault(node.subnet, SubnetStats()).add(node, clock, self.half_life)

    def plan(self, package: TaskPackage) -> PlanProposal:
        proposal = self.good.plan(self.relearned(package))
        return replace(proposal, plan=self.with_retries(proposal.plan))

    def with_retries(self, plan: WorkflowPlan) -> WorkflowPlan:
        """``plan`` with each node on a subnet seen enough declaring at least the retries
        that subnet needs to succeed with probability ``success``."""
        policies = dict(plan.error_handling)
        with self._lock:
            for node in plan.nodes:
                stats = self.stats.get(node.subnet)
                if stats is None or stats.attempts < self.min_attempts:
                    continue
                policy = policies.get(node.id, ErrorPolicy())
                retries = max(policy.retry_count, stats.retries(self.success))
                policies[node.id] = policy.model_copy(update={"retry_count": retries})
        return plan.model_copy(update={"error_handling": policies})

    def relearned(self, package: TaskPackage) -> TaskPackage:
        """``package`` with the profiles of the subnets seen enough rewritten, and those
        that nearly always fail left out while their kind has another subnet."""
        allowed = package.constraints.allowed_subnets
        tools = dict(package.available_tools)
        with self._lock:
            for subnet, advertised in package.available_tools.items():
                stats = self.stats.get(subnet)
                if stats is None or stats.attempts < self.min_attempts:
                    continue
                if stats.failure_rate >= self.give_up and _another_of_kind(tools, subnet, advertised.type, allowed):
                    del tools[subnet]
                else:
                    tools[subnet] = stats.profile(advertised)
        return package.model_copy(update={"available_tools": tools})


def _another_of_kind(tools: dict[str, ToolInfo], subnet: str, kind: str, allowed: list[str] | None) -> bool:
    return any(other != subnet and info.type == kind and (allowed is None or other in allowed)
               for other, info in tools.items())
