"""How much of the plan a task package hands over: its hint tier, and its public examples.

A family can be sent at three tiers (docs/tasks.md, "Hint tiers"):

- ``full``: the step hints as written: every action, its params and their DataRefs.
- ``outline``: the steps' actions and kinds, in order, under neutral ids (``s1``, ``s2``
  ...), without params or wiring: a planner knows *what kind* of work is needed and
  has to work out the params and the data flow itself.
- ``goal``: no steps: the description, the inputs' schema, the action catalogue
  (``protocol.actions``) and the public examples.

Every package, at every tier, carries ``examples``: public instances (their inputs,
any data a subnet holds for them, and the answer a correct plan produces), drawn from
seeds a validator never scores on. A validator draws the tier per execution from its
secret with :data:`TIER_SHARES`; scoring does not depend on the tier.
:func:`protocol.task.at_tier` makes a package's view at a tier.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["EXAMPLES", "TIERS", "TIER_SHARES", "HintTier", "PublicExample"]

HintTier = Literal["full", "outline", "goal"]
TIERS: tuple[HintTier, ...] = get_args(HintTier)

TIER_SHARES: dict[HintTier, float] = {"full": 0.2, "outline": 0.3, "goal": 0.5}
"""The share of executions a validator sends at each tier (they sum to 1)."""

EXAMPLES = 3
"""Public examples per package."""


class PublicExample(BaseModel):
    """One public instance: what a plan is given and what it should answer.

    ``output`` holds one of ``text`` (the final node's text), ``json`` (the JSON the final
    node's text or ``result`` carries) or ``cases`` with ``entry_point`` (code: calls of
    the function and what they return). ``holdings`` is the data that subnets hold for
    this instance, by the ids its inputs name (docs/tasks.md, "Held data").
    """

    model_config = ConfigDict(extra="forbid")

    inputs: dict[str, Any] = Field(default_factory=dict)
    holdings: dict[str, Any] = Field(default_factory=dict)
    output: dict[str, Any] = Field(default_factory=dict)
