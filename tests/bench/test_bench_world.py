"""`dagnet bench world`'s figures for issue 28: medians over families × secrets."""

from __future__ import annotations

from bench.world import VALIDATOR, hidden_seeds, medians, play, static_plans
from planners.public import plan_in_world
from protocol.canonical import plan_digest
from subnets.forecast import forecast_world
from tasks import family


def _row(secret: int, task_id: str, tempo: int, good: float, oracle: float, learner: float) -> dict:
    return {
        "secret": secret,
        "task_id": task_id,
        "tempo": tempo,
        "good": good,
        "oracle": oracle,
        "learner": learner,
        "good mean": good,
        "learner mean": learner,
    }


def test_the_headroom_is_a_median_over_families_and_secrets_of_their_pooled_tempos() -> None:
    """Three samples whose oracle − good over two tempos is 0.1, 0.2 and 0.9: the median is
    0.2 (a mean would say 0.4); the last tempo's gains 0.0, 0.1, 0.3 give 0.1, half of it."""
    rows = [
        _row(0, "a", 0, 0.5, 0.6, 0.5),
        _row(0, "a", 1, 0.5, 0.6, 0.5),
        _row(0, "b", 0, 0.5, 0.6, 0.5),
        _row(0, "b", 1, 0.5, 0.8, 0.6),
        _row(1, "a", 0, 0.0, 0.9, 0.0),
        _row(1, "a", 1, 0.0, 0.9, 0.3),
    ]
    found = medians(rows, tempos=2)
    assert found["median_headroom"] == 0.2
    assert round(found["final_gain"], 9) == 0.1 and round(found["recovered"], 9) == 0.5


def test_the_last_tempo_plays_more_hidden_seeds_none_of_them_public_or_played_before() -> None:
    earlier = {seed for tempo in range(9) for seed in hidden_seeds(tempo, 1)}
    last = hidden_seeds(9, 1, 5)
    assert len(last) == 5 and 0 not in last and not earlier & set(last)


class _Listener:
    """A learner that plans as the reference does from what it is sent, and keeps it."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int | None, str | None]] = []
        self.heard: list[tuple[str, int | None]] = []

    def plan(self, package):
        forecast = package.forecast
        self.sent.append((package.task_id, *((forecast.tempo, forecast.validator) if forecast else (None, None))))
        return plan_in_world(package, forecast_world(forecast))

    def observe(self, feedback) -> None:
        self.heard.append((feedback.validator_hotkey, feedback.tempo))


def test_the_learner_is_sent_the_forecast_the_reference_plans_on_and_hears_that_validator() -> None:
    """As a validator sends it: each tempo's package carries the forecast of that tempo from
    the worlds before it, so a learner planning on it alone sends the reference's plan and
    scores the reference's S; its feedback names the same validator and tempo."""
    families = [family("rag_towns"), family("dt_grades")]
    student = _Listener()
    played = list(play(families, static_plans(families), secret=7, tempos=2, seeds=1, student=student))
    assert student.sent == [(f.task_id, tempo, VALIDATOR) for tempo in range(2) for f in families]
    assert set(student.heard) == {(VALIDATOR, 0), (VALIDATOR, 1)}
    for p in played:
        assert plan_digest(p.plans["learner"].plan) == plan_digest(p.plans["reference"].plan)
        assert p.scores["learner"] == p.scores["reference"]
