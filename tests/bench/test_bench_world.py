"""`dagnet bench world`'s figures for issue 28: medians over families × secrets."""

from __future__ import annotations

from bench.world import hidden_seeds, medians


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
