"""What a validator's owned execution plays: the task's partner subnets, run by the
reference tools of this package, each as its profile says, its data and retrieval
subnets holding the instance's held data (:mod:`subnets.holdings`).

:mod:`engine.owned` runs a plan on any :data:`engine.owned.OwnedRunnerFactory`; this is
the one every validator, ``dagnet run --task`` and ``dagnet eval`` hand it.
"""

from __future__ import annotations

from protocol.runner import NodeRunner
from protocol.task import Task

from .holdings import holding
from .llm import LLMConfig
from .registry import default_registry
from .runner import LocalRunner
from .world import ADVERTISED, World

__all__ = ["owned_runner"]


def owned_runner(task: Task, *, llm: LLMConfig | None = None, world: World = ADVERTISED) -> NodeRunner:
    """The runner that plays ``task``'s partner subnets with the reference tools, each as
    ``world`` (a tempo's hidden truth; by default the advertised profile) says, on the
    instance's seed. ``llm`` answers the ``llm`` action (an operator's openai adapter); a
    task without partner subnets gets the bare tools, with no price, delay or failure."""
    runner = LocalRunner(
        default_registry(llm=llm), subnets=task.available_tools or None, world=world, seed=task.seed or 0
    )
    return holding(runner, task.holdings)
