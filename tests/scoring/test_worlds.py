"""Errors that count worlds (scoring/worlds.py): the mean margin over every step, its
cluster-robust error over the worlds the steps were played in, and a bar that rises where
the worlds are few."""

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoring.margin import FLOOR, Answer, Payout, network_pay
from scoring.worlds import Tally, added, bar, clustered, t_cdf, tallies, trimmed

# Student's t quantiles at 0.975 from any printed table.
TABLE = {1: 12.706, 2: 4.303, 3: 3.182, 5: 2.571, 10: 2.228, 23: 2.069, 30: 2.042, 120: 1.980}


@pytest.mark.parametrize("df", sorted(TABLE))
def test_the_t_distribution_matches_the_printed_table(df: int) -> None:
    assert t_cdf(TABLE[df], df) == pytest.approx(0.975, abs=2e-5)
    assert t_cdf(-TABLE[df], df) == pytest.approx(0.025, abs=2e-5)
    assert t_cdf(0.0, df) == pytest.approx(0.5)


def test_the_bar_is_two_errors_with_many_worlds_and_more_with_few() -> None:
    assert bar(2.0, 1) == math.inf  # one world says nothing of its luck
    assert bar(2.0, 2) == pytest.approx(13.97, abs=0.01)
    assert bar(2.0, 6) == pytest.approx(2.65, abs=0.01)
    assert bar(2.0, 24) == pytest.approx(2.115, abs=0.005)
    assert bar(2.0, 100_000) == pytest.approx(2.0, abs=1e-3)
    assert bar(0.0, 5) == pytest.approx(0.0, abs=1e-9) and bar(40.0, 5) == math.inf  # --k-se 0 and beyond floats
    bars = [bar(2.0, g) for g in range(2, 60)]
    assert bars == sorted(bars, reverse=True)


@given(st.lists(st.floats(-1, 1), min_size=2, max_size=60))
def test_steps_of_their_own_give_the_textbook_error(margins: list[float]) -> None:
    mean, se, units = clustered(tallies(margins))
    assert units == len(margins) and mean == pytest.approx(statistics.fmean(margins), abs=1e-12)
    assert se == pytest.approx(statistics.stdev(margins) / math.sqrt(len(margins)), abs=1e-12)


def test_a_world_s_margins_are_one_unit_and_the_window_keeps_the_last_worlds() -> None:
    window: list[Tally] = []
    for world, margin in [(0, 0.1), (0, 0.3), (1, -0.1), (0, 0.2), (2, 0.0)]:  # a late step of world 0 joins it
        window = added(window, margin, world)
    assert window == [Tally(0, 3, pytest.approx(0.6)), Tally(1, 1, -0.1), Tally(2, 1, 0.0)]
    assert trimmed(window, units=300, worlds=2) == window[1:]
    steps = tallies([0.1, 0.2, 0.3])
    assert trimmed(steps, units=2, worlds=24) == steps[1:]  # without worlds: the last steps
    assert clustered([]) == (0.0, math.inf, 0) and clustered(window[:1])[1] == math.inf


def test_one_world_s_luck_is_not_paid_however_many_steps_it_had() -> None:
    """The attack: a planner level with the reference that happens to suit one world's bad
    spells (ahead by 0.15 on each of its 50 steps, level in the five other worlds, where
    the step's noise is ±0.05). Counted by steps it is 3.9 errors clear; counted by worlds,
    not: its one good world is the whole of its lead."""
    margins, worlds = [], []
    for world in range(6):
        for k in range(50):
            margins.append((0.15 if world == 2 else 0.0) + (0.05 if k % 2 else -0.05))
            worlds.append(world)
    by_steps = clustered(tallies(margins))
    assert by_steps[0] - 2 * by_steps[1] > 0
    mean, se, units = clustered(tallies(margins, worlds))
    assert units == 6 and mean - bar(2.0, units) * se < 0
    steps = [(k, {1: Answer(f"p{k}", 0.7 + m), 2: Answer("r", 0.7)}, 0.7) for k, m in enumerate(margins)]
    assert network_pay(steps).means[1].clear > 0  # as validators counted until worlds were counted
    counted = network_pay(steps, burn_uid=0, worlds=dict(enumerate(worlds))).paid
    assert counted.payout is Payout.BURN and counted.weights[1] <= FLOOR  # at most the floor, as live subnets burn


def test_a_planner_ahead_in_every_world_is_paid() -> None:
    margins = [0.03 + 0.02 * math.sin(world) + (0.1 if k % 2 else -0.1) for world in range(24) for k in range(13)]
    worlds = [world for world in range(24) for _ in range(13)]
    mean, se, units = clustered(tallies(margins, worlds))
    assert units == 24 and mean - bar(2.0, units) * se > 0
