"""The validator's reference plans on what is public (planners/public.py,
subnets/forecast.py, validator/margins.py): the worlds published before the tempo and the
documented drift, never the tempo's own world; a miner holding the published worlds sends
the reference's very plan (margin 0, the floor); every node declares the retry ceiling."""

from __future__ import annotations

from planners import GoodPlanner
from planners.public import RETRIES, reference_plan
from protocol.canonical import plan_digest
from subnets.forecast import forecast, published_forecast
from subnets.world import World, world_for
from tasks import family
from validator.margins import Forecasts

FAMILY = family("rag_comets")
TOOLS = FAMILY.package.available_tools


def test_the_forecast_reads_only_worlds_already_published() -> None:
    asked: list[int] = []

    def worlds(secret: int, tempo: int, tools) -> World:
        asked.append(tempo)
        return world_for(secret, tempo, tools)

    kept = Forecasts(worlds)
    first = kept(11, world_for(11, 7, TOOLS), TOOLS)
    assert sorted(asked) == list(range(7))  # tempos 0–6: over and published; never 7
    assert kept(11, world_for(11, 7, TOOLS), TOOLS) is first and len(asked) == 7  # kept for the tempo
    assert kept(11, World(), TOOLS) is None  # the advertised world has no tempo


def test_a_miner_holding_the_published_worlds_sends_the_references_plan() -> None:
    """What ``GET /world/<t>`` returns (the JSON of each past world) is all a miner needs:
    its plan is the reference's, digest for digest, so it earns no margin over it."""
    fetched = {t: World.from_json(world_for(11, t, TOOLS).to_json()) for t in range(9)}
    mine = reference_plan(FAMILY.package, forecast(fetched, 9, TOOLS))
    validators = reference_plan(FAMILY.package, published_forecast(world_for, 11, 9, TOOLS))
    assert plan_digest(mine.plan) == plan_digest(validators.plan)
    assert all(policy.retry_count == RETRIES for policy in validators.plan.error_handling.values())
    assert set(validators.plan.error_handling) == {node.id for node in validators.plan.nodes}


def test_without_a_hidden_world_the_reference_is_good() -> None:
    assert reference_plan(FAMILY.package, None).plan == GoodPlanner(timed=False).plan(FAMILY.package).plan
