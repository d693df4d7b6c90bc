"""Two miners that copy the example learner, written against the public planner interface
only (docs/scoring.md, "Copies and variants by first commit"): each runs its own learner
on its own feedback and sends the plan under other names.

- ``RenamedLearner``: the learner's plan with every node renamed.
- ``DisguisedLearner``: renamed, the nodes in another order, ``max_parallel`` 64.

Served beside the learner, they show what a validator pays a copy: nothing. From this
folder (``--planner`` finds ``copycats`` in the working folder)::

    ../../.venv/bin/dagnet localnet --planner copycats:RenamedLearner --planner copycats:DisguisedLearner
"""

from __future__ import annotations

from dataclasses import replace

from learner_planner import Learner
from planners import PlanProposal
from planners.attackers import disguised, renamed
from protocol.synapse import TaskPackage


class RenamedLearner(Learner):
    name = "renamed-learner"

    def plan(self, package: TaskPackage) -> PlanProposal:
        proposal = super().plan(package)
        return replace(proposal, plan=renamed(proposal.plan))


class DisguisedLearner(Learner):
    name = "disguised-learner"

    def plan(self, package: TaskPackage) -> PlanProposal:
        proposal = super().plan(package)
        return replace(proposal, plan=disguised(proposal.plan, 64))
