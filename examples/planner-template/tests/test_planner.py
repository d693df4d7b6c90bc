"""The template planner answers every shipped task family with a plan the validator
accepts, and says so when it cannot plan. Run with ``python -m pytest tests``."""

from __future__ import annotations

import pytest

from planner_template import TemplatePlanner
from planners import PlanningError, load_planner
from protocol.task import at_tier
from protocol.validation import check_plan_for
from tasks import load_families


@pytest.mark.parametrize("family", load_families(), ids=lambda f: f.task_id)
def test_every_family_gets_a_valid_plan(family) -> None:
    proposal = TemplatePlanner().plan(family.package)
    check = check_plan_for(proposal.plan, family.package)
    assert check.valid, (check.errors, check.node_errors)


@pytest.mark.parametrize("tier", ["outline", "goal"])
def test_a_package_without_full_hints_is_unplannable(tier: str) -> None:
    package = at_tier(load_families()[0].package, tier)
    with pytest.raises(PlanningError, match=f"full step hints only; this package is at the {tier} tier"):
        TemplatePlanner().plan(package)


def test_installed_as_the_template_entry_point() -> None:
    assert isinstance(load_planner("template", {"spare_retries": 0}), TemplatePlanner)
