"""Weights: warm-up scale, softmax normalisation (the properties docs/scoring.md promises), u16 encoding."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoring import normalize_weights, to_u16, warmup_scale
from scoring.weights import TEMPERATURE


def test_warmup_scales_only_during_immunity() -> None:
    assert [warmup_scale(n, True) for n in (0, 5, 10, 20, 50)] == [0.0, 0.25, 0.5, 1.0, 1.0]
    assert warmup_scale(0, False) == 1.0
    assert warmup_scale(3, True, full_at=6) == 0.5


GOOD, NAIVE_WITH_RETRIES, NAIVE = 0.80, 0.75, 0.58
scores_strategy = st.dictionaries(st.integers(0, 255), st.floats(0.0, 1.0, allow_nan=False), min_size=1, max_size=64)


@pytest.mark.parametrize(
    "network",
    [
        {0: GOOD, 1: NAIVE_WITH_RETRIES},
        {**{u: GOOD for u in range(5)}, **{u: NAIVE_WITH_RETRIES for u in range(5, 10)}},
    ],
)
def test_a_planner_gets_at_least_twice_a_chain_with_retries(network: dict[int, float]) -> None:
    weights = normalize_weights(network)
    assert math.fsum(weights.values()) == pytest.approx(1.0)
    good = [w for uid, w in weights.items() if network[uid] == GOOD]
    chain = [w for uid, w in weights.items() if network[uid] == NAIVE_WITH_RETRIES]
    assert min(good) >= 2 * max(chain)


def test_a_planner_leaves_a_naive_chain_little() -> None:
    weights = normalize_weights({0: GOOD, 1: NAIVE})
    assert weights[1] < 0.03


@given(base=st.floats(0.01, 0.995), noise=st.floats(0.0, 0.005), others=scores_strategy)
def test_two_copies_apart_only_by_noise_get_weights_within_ten_percent(
    base: float, noise: float, others: dict[int, float]
) -> None:
    network = {uid + 2: value for uid, value in others.items()} | {0: base, 1: base + noise}
    weights = normalize_weights(network)
    assert weights[1] <= 1.10 * weights[0]


@given(scores_strategy)
def test_weights_never_reorder_miners(scores: dict[int, float]) -> None:
    weights = normalize_weights(scores)
    for a, b in itertools.combinations(scores, 2):
        if scores[a] > scores[b]:
            assert weights.get(a, 0.0) >= weights.get(b, 0.0)


@given(scores_strategy)
def test_miners_at_zero_get_nothing_and_the_rest_sum_to_one(scores: dict[int, float]) -> None:
    weights = normalize_weights(scores)
    assert set(weights) == {uid for uid, value in scores.items() if value > 0}
    assert all(value > 0 for value in weights.values())
    if weights:
        assert math.fsum(weights.values()) == pytest.approx(1.0)


def test_one_planner_among_do_nothing_miners_takes_everything() -> None:
    assert normalize_weights({0: GOOD} | {uid: 0.0 for uid in range(1, 10)}) == {0: 1.0}


def test_the_ratio_of_two_weights_depends_only_on_the_score_difference() -> None:
    low = normalize_weights({0: 0.30, 1: 0.35})
    high = normalize_weights({0: 0.90, 1: 0.95, 2: 0.10})
    assert low[1] / low[0] == pytest.approx(high[1] / high[0]) == pytest.approx(math.exp(0.05 / TEMPERATURE))


@pytest.mark.parametrize("scores", [{}, {1: 0.0, 2: 0.0}, {1: -1.0, 2: math.nan}])
def test_no_positive_score_gives_no_weights(scores: dict[int, float]) -> None:
    assert normalize_weights(scores) == {}


def test_negative_nan_and_infinite_scores_count_as_zero() -> None:
    scores = {uid: 0.5 for uid in range(8)} | {8: -5.0, 9: math.nan, 10: math.inf}
    assert set(normalize_weights(scores)) == set(range(8))


def test_bad_temperature_is_rejected() -> None:
    with pytest.raises(ValueError):
        normalize_weights({1: 1.0}, temperature=0.0)


def test_result_is_deterministic_and_independent_of_input_order() -> None:
    scores = {uid: (uid * 37 % 11) / 10 for uid in range(30)}
    reordered = dict(reversed(list(scores.items())))
    assert normalize_weights(scores) == normalize_weights(reordered)


def test_to_u16_scales_the_largest_to_65535() -> None:
    uids, values = to_u16({3: 0.5, 1: 0.25, 2: 0.0, 7: 0.125})
    assert uids == [1, 3, 7]
    assert values == [32768, 65535, 16384]


def test_to_u16_drops_nothing_to_send() -> None:
    assert to_u16({}) == ([], [])
    assert to_u16({1: 0.0, 2: math.nan}) == ([], [])
    assert to_u16({1: 1.0, 2: 1e-9}) == ([1], [65535])
