"""Weights: warm-up scale, capped water-filling normalisation, u16 encoding."""

from __future__ import annotations

import math

import pytest

from scoring import normalize_weights, to_u16, warmup_scale


def test_warmup_scales_only_during_immunity() -> None:
    assert [warmup_scale(n, True) for n in (0, 5, 10, 20, 50)] == [0.0, 0.25, 0.5, 1.0, 1.0]
    assert warmup_scale(0, False) == 1.0
    assert warmup_scale(3, True, full_at=6) == 0.5


def test_uncapped_weights_are_proportional() -> None:
    scores = {uid: 1.0 for uid in range(10)} | {10: 0.0}
    weights = normalize_weights(scores)
    assert set(weights) == set(range(10))
    assert all(w == pytest.approx(0.1) for w in weights.values())


def test_cap_holds_and_excess_is_redistributed_proportionally() -> None:
    scores = {0: 10.0, 1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0, 5: 1.0, 6: 1.0, 7: 2.0}
    weights = normalize_weights(scores, cap=0.15)
    assert math.fsum(weights.values()) == pytest.approx(1.0)
    assert max(weights.values()) <= 0.15 + 1e-12
    assert weights[0] == 0.15 and weights[7] == 0.15
    # the rest share 0.70 in proportion to their scores (all equal here)
    assert all(weights[uid] == pytest.approx(0.70 / 6) for uid in range(1, 7))


def test_water_filling_needs_more_than_one_round() -> None:
    # after capping uid 0, uid 1's share rises above the cap too
    scores = {0: 100.0, 1: 18.0} | {uid: 10.0 for uid in range(2, 10)}
    weights = normalize_weights(scores, cap=0.15)
    assert weights[0] == weights[1] == 0.15
    assert all(weights[uid] == pytest.approx(0.70 / 8) for uid in range(2, 10))
    assert math.fsum(weights.values()) == pytest.approx(1.0)


def test_one_miner_gets_everything() -> None:
    assert normalize_weights({4: 0.3}) == {4: 1.0}


def test_too_few_miners_for_the_cap_get_uniform_weights() -> None:
    weights = normalize_weights({1: 0.9, 2: 0.1, 3: 0.5, 4: 0.0})
    assert weights == {1: pytest.approx(1 / 3), 2: pytest.approx(1 / 3), 3: pytest.approx(1 / 3)}


def test_exactly_feasible_cap_is_met() -> None:
    weights = normalize_weights({1: 4.0, 2: 1.0, 3: 1.0, 4: 1.0}, cap=0.25)
    assert weights == {1: 0.25, 2: 0.25, 3: 0.25, 4: 0.25}


@pytest.mark.parametrize("scores", [{}, {1: 0.0, 2: 0.0}, {1: -1.0, 2: math.nan}])
def test_no_positive_score_gives_no_weights(scores: dict[int, float]) -> None:
    assert normalize_weights(scores) == {}


def test_negative_and_nan_scores_count_as_zero() -> None:
    scores = {uid: 1.0 for uid in range(8)} | {8: -5.0, 9: math.nan, 10: math.inf}
    weights = normalize_weights(scores)
    assert set(weights) == set(range(8))


def test_bad_cap_is_rejected() -> None:
    with pytest.raises(ValueError):
        normalize_weights({1: 1.0}, cap=0.0)


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
