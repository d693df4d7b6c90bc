"""The forecast a package carries (protocol/forecast.py): what a miner parses of it."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from protocol.forecast import SubnetForecast, WorldForecast
from protocol.synapse import WorkflowSynapse
from subnets.forecast import forecast, forecast_world, with_forecast
from subnets.world import world_for
from tasks import family

PACKAGE = family("rag_towns").package
TOLD = {
    "latency": 0.9,
    "spread": 0.3,
    "tail_p": 0.03,
    "tail": 3.0,
    "price": 1.1,
    "fail_p": 0.2,
    "outage_p": 0.04,
    "degrade_p": 0.0,
}


def test_a_package_carries_its_forecast_over_the_wire_exactly() -> None:
    """What the miner parses is what the validator's reference planned on, float for float."""
    tools = PACKAGE.available_tools
    prior = forecast({t: world_for(3, t, tools) for t in range(5)}, 5, tools)
    sent = with_forecast(PACKAGE, prior, "5Validator")
    parsed = WorkflowSynapse.model_validate_json(sent.model_dump_json())
    assert parsed.forecast == sent.forecast and parsed.forecast is not None
    assert set(parsed.forecast.subnets) == set(tools)
    assert forecast_world(parsed.forecast).subnets == prior.expected.subnets


@pytest.mark.parametrize(
    "bad",
    [{"latency": 0.0}, {"latency": math.inf}, {"price": -1.0}, {"fail_p": 1.5}, {"tail": 0.5}, {"spread": math.nan}],
)
def test_a_forecast_out_of_range_is_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValidationError):
        SubnetForecast(**(TOLD | bad))


def test_a_forecast_names_its_tempo_and_validator_and_nothing_else() -> None:
    one = WorldForecast(tempo=7, validator="5V", spell_p=0.15, subnets={"sn1": SubnetForecast(**TOLD)})
    with pytest.raises(ValidationError):
        WorldForecast.model_validate(one.model_dump() | {"secret": 1})
    with pytest.raises(ValidationError):
        WorldForecast.model_validate(one.model_dump() | {"tempo": -1})
