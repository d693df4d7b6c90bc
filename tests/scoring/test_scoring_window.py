"""Rolling windows: equal-weight mean of the last 100 scores per uid, persisted as plain dicts."""

from __future__ import annotations

import json
import math

import pytest

from scoring import RollingWindow


def test_mean_is_equal_weight_over_held_scores() -> None:
    window = RollingWindow()
    for score in (0.2, 0.4, 0.9):
        window.add(7, score)
    assert window.mean(7) == pytest.approx(0.5)
    assert window.count(7) == 3


def test_101st_score_evicts_the_oldest() -> None:
    window = RollingWindow(size=100)
    window.add(1, 1.0)
    for _ in range(99):
        window.add(1, 0.0)
    assert (window.count(1), window.mean(1)) == (100, 0.01)
    window.add(1, 0.0)
    assert (window.count(1), window.mean(1)) == (100, 0.0)


def test_uids_are_independent_and_unknown_uid_is_zero() -> None:
    window = RollingWindow(size=2)
    window.add(1, 1.0)
    window.add(2, 0.5)
    window.add(2, 0.1)
    window.add(2, 0.3)
    assert window.means() == {1: 1.0, 2: pytest.approx(0.2)}
    assert (window.mean(99), window.count(99)) == (0.0, 0)


def test_reset_forgets_a_uid() -> None:
    window = RollingWindow()
    window.add(3, 1.0)
    window.reset(3)
    assert window.uids() == [] and window.mean(3) == 0.0


@pytest.mark.parametrize(("raw", "stored"), [(math.nan, 0.0), (math.inf, 0.0), (-0.5, 0.0), (1.5, 1.0)])
def test_out_of_range_scores_are_clamped(raw: float, stored: float) -> None:
    window = RollingWindow()
    window.add(0, raw)
    assert window.mean(0) == stored


def test_round_trip_through_json() -> None:
    window = RollingWindow(size=3)
    for uid, score in [(5, 0.1), (5, 0.2), (2, 0.7), (5, 0.3), (5, 0.4)]:
        window.add(uid, score)
    restored = RollingWindow.from_dict(json.loads(json.dumps(window.to_dict())))
    assert restored.to_dict() == window.to_dict() == {"size": 3, "scores": {"2": [0.7], "5": [0.2, 0.3, 0.4]}}
    assert restored.means() == window.means()


def test_from_dict_keeps_the_newest_when_too_long() -> None:
    restored = RollingWindow.from_dict({"size": 2, "scores": {"1": [0.0, 0.5, 1.0]}})
    assert restored.to_dict()["scores"] == {"1": [0.5, 1.0]}


@pytest.mark.parametrize(
    "data",
    [{}, {"size": 0, "scores": {}}, {"size": 3}, {"size": 3, "scores": {"x": [1]}}, {"size": 3, "scores": {"1": 0.5}},
     {"size": 3, "scores": {"-1": [0.5]}}, {"size": 3, "scores": []}, {"size": 3, "scores": {"1": ["a"]}}],
)  # fmt: skip
def test_malformed_dict_raises_value_error(data: dict) -> None:
    with pytest.raises(ValueError):
        RollingWindow.from_dict(data)
