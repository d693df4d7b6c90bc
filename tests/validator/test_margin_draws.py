"""Several draws of a step's world (validator/draws.py): a draw is the same world with
other dice; rounds are whole, so every answer's mean is over the same draws; drawing
stops at its CPU, at the deadline and at a failure of the validator's own, charging
nobody; and an answer's mean over the draws is what its luck on one draw is not."""

from __future__ import annotations

import time

from engine.owned import evaluate_owned
from neurons.localrun import family_task
from planners import load_planner
from protocol.validation import check_plan_for
from subnets.owned import owned_runner
from subnets.world import world_for
from validator.draws import CPU_FLOOR_S, MOST_DRAWS, DrawLimits, cpu_s, draw_rounds, mean_over

FIRST = {"reference": 0.5, ("digest", 1.0): 0.75, ("other", None): 0.0}
"""Draw 0's S of three answers (keys as the step keys them)."""


def _burn(seconds: float) -> None:
    """Use ``seconds`` of this process's CPU."""
    until = cpu_s() + seconds
    while cpu_s() < until:
        pass


def test_a_draw_is_the_same_world_with_other_dice() -> None:
    task = family_task("dt_grades", 3)
    world = world_for(4, 2, task.available_tools)
    assert world.drawn(0) is world
    assert world.drawn(1).subnets == world.subnets and world.drawn(1).salt != world.salt
    assert world.drawn(1) == world.drawn(1) and world.drawn(1).salt != world.drawn(2).salt
    proposal = load_planner("good").plan(task.package())
    plan, cost = proposal.plan, proposal.total_estimated_cost
    check = check_plan_for(plan, task)
    scores = [
        evaluate_owned(plan, check, task, owned_runner(task, world=world.drawn(k)), total_estimated_cost=cost).score.S
        for k in range(MOST_DRAWS)
    ]
    assert len(set(scores)) > 1  # other dice: good's plan fails in some draws, not in others


def test_rounds_are_whole_and_every_answer_is_drawn_alike() -> None:
    asked: list[tuple[object, int]] = []

    def score(key: object, draw: int) -> float:
        asked.append((key, draw))
        return FIRST[key] + draw / 10  # type: ignore[index]

    drawn = draw_rounds(FIRST, score, DrawLimits(cpu_s=60.0, most=4))
    assert (drawn.draws, drawn.stopped) == (4, "most")
    assert sorted(asked, key=str) == sorted(((key, d) for key in FIRST for d in (1, 2, 3)), key=str)
    assert drawn.means == {key: mean_over([s, s + 0.1, s + 0.2, s + 0.3]) for key, s in FIRST.items()}


def test_drawing_stops_at_its_cpu_and_a_round_cut_short_does_not_count() -> None:
    """Each run uses 30 ms of CPU: a round of three 90 ms. With 150 ms, the first round
    ends inside it and the second does not: it is dropped, every mean is over 2 draws."""
    asked: list[int] = []

    def score(key: object, draw: int) -> float:
        asked.append(draw)
        _burn(0.03)
        return 1.0

    drawn = draw_rounds(FIRST, score, DrawLimits(cpu_s=0.15))
    assert (drawn.draws, drawn.stopped) == (2, "cpu") and 2 in asked  # the second round began, not counted
    assert drawn.means == {key: mean_over([s, 1.0]) for key, s in FIRST.items()}


def test_a_step_may_draw_for_as_much_cpu_as_it_used_and_at_least_the_floor() -> None:
    assert DrawLimits.for_step(3.0, None).cpu_s == 3.0
    assert DrawLimits.for_step(0.01, None).cpu_s == CPU_FLOOR_S


def test_drawing_stops_at_the_deadline() -> None:
    drawn = draw_rounds(FIRST, lambda key, draw: 1.0, DrawLimits(cpu_s=60.0, until=time.monotonic()))
    assert (drawn.draws, drawn.stopped) == (1, "deadline") and drawn.means == FIRST


def test_a_failure_of_the_validators_own_stops_drawing_and_charges_nobody() -> None:
    def score(key: object, draw: int) -> float:
        if draw == 3 and key == ("other", None):
            raise RuntimeError("an engine bug")
        return 1.0

    drawn = draw_rounds(FIRST, score, DrawLimits(cpu_s=60.0))
    assert (drawn.draws, drawn.stopped) == (3, "failure")  # draws 0, 1 and 2: the third round dropped for all
    assert drawn.means == {key: mean_over([s, 1.0, 1.0]) for key, s in FIRST.items()}


def test_no_answer_no_draws() -> None:
    assert draw_rounds({}, lambda key, draw: 1.0, DrawLimits(cpu_s=60.0)).draws == 1
