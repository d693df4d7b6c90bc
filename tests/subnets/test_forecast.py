"""The forecast of a tempo's world from the published past (subnets/forecast.py): the
inverse of the world's maps, the Gaussian conditional mean the documented drift gives,
and how much of a tempo it leaves to feedback."""

from __future__ import annotations

import functools
import math
import statistics

from protocol.synapse import ToolInfo
from subnets.forecast import forecast, published_forecast
from subnets.world import (
    FRESH_SHARE,
    PARAMS,
    SPELL_P,
    latent_covariance,
    latents_of,
    spelled,
    truth_of,
    world_for,
)

KINDS = ("text", "math", "retrieval", "data")
TOOLS = {
    f"sn{i}": ToolInfo(type=KINDS[i % 4], avg_cost=0.001, avg_latency=0.1, fail_first=i % 3 == 0) for i in range(120)
}


def test_latent_values_are_read_back_from_a_truth():
    z = {"latency": 0.7, "tail": -0.4, "price": 1.3, "fail": -1.1, "outage": 0.2, "degrade": 0.9}
    text = ToolInfo(type="text", avg_latency=0.1)
    back = latents_of(truth_of(z, text), text)
    assert back.keys() == set(PARAMS)
    assert all(math.isclose(back[p], z[p], abs_tol=1e-9) for p in PARAMS), back
    spell = latents_of(spelled(truth_of(z, text)), text)
    assert "outage" not in spell and "latency" not in spell  # a spell's values are not the subnet's own


def test_the_drift_is_a_stationary_covariance_with_a_fresh_part():
    assert latent_covariance(0) == 1.0
    assert math.isclose(latent_covariance(1), latent_covariance(-1))
    assert latent_covariance(1) <= 1 - FRESH_SHARE
    assert latent_covariance(40) == latent_covariance(80) > 0  # the persistent part alone


def test_with_nothing_published_the_forecast_is_the_prior():
    prior = forecast({}, 0, TOOLS)
    assert prior.expected.subnets["sn2"].latency == prior.expected.subnets["sn5"].latency
    assert all(sd == 1.0 for sd in prior.spread["sn2"].values())


def test_the_forecast_beats_the_last_published_world_and_leaves_the_fresh_part():
    """Over 120 subnets × 6 tempos, the forecast's latent error is below the last
    published world's, and no forecast explains the fresh share: what only feedback from
    the tempo itself can tell."""
    by_forecast, by_last, spread = [], [], []
    drawn = functools.cache(lambda secret, tempo: world_for(secret, tempo, TOOLS))  # each world drawn once
    for tempo in range(20, 26):
        truth = drawn(3, tempo)
        last = drawn(3, tempo - 1)
        predicted = published_forecast(lambda secret, t, tools: drawn(secret, t), 3, tempo, TOOLS)
        guess, guess_spread = predicted.expected, predicted.spread["sn7"]
        for name, info in TOOLS.items():
            real = latents_of(truth.subnets[name], info)
            if "latency" not in real or last.subnets[name].spell:
                continue
            by_forecast.append((latents_of(guess.subnets[name], info)["price"] - real["price"]) ** 2)
            by_last.append((latents_of(last.subnets[name], info)["price"] - real["price"]) ** 2)
            spread.append(real["price"] ** 2)
    assert statistics.fmean(by_forecast) < 0.9 * statistics.fmean(by_last)
    assert statistics.fmean(by_forecast) > 0.8 * FRESH_SHARE * statistics.fmean(spread)
    assert all(FRESH_SHARE**0.5 <= guess_spread[p] < 1 for p in ("price", "fail"))  # sn7 is no text subnet


def test_spells_come_and_go_with_the_tempo():
    worlds = [world_for(5, tempo, TOOLS).subnets for tempo in range(10)]  # each drawn once, not once a subnet
    spells = [sum(subnets[n].spell for n in TOOLS) / len(TOOLS) for subnets in worlds]
    assert abs(statistics.fmean(spells) - SPELL_P) < 0.04
    first, second = world_for(5, 0, TOOLS).subnets, world_for(5, 1, TOOLS).subnets
    assert {n for n in TOOLS if first[n].spell} != {n for n in TOOLS if second[n].spell}
