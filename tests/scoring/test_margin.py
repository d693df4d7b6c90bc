"""Paid for beating the reference (scoring/margin.py, protocol/canonical.py): copies are one
answer whatever their node names, order or dead nodes, and by first commit only the
earliest is paid; margins clear of their error; the floor, the fallback and the shares
the issue's networks need."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.canonical import plan_digest
from protocol.plan import WorkflowPlan
from scoring.margin import FLOOR, K_SE, Answer, Means, Payout, credits, margin_weights, network_pay, window_means
from scoring.worlds import bar, tallies
from tests.support.plans import node, plan


def _three_steps(
    a: str = "a", b: str = "b", c: str = "c", *, order=(0, 1, 2), extra: tuple[dict, ...] = ()
) -> WorkflowPlan:
    nodes = [
        node(a, "search", subnet="sn5", query="${input.q}"),
        node(b, "fetch", subnet="sn2", doc=f"${{{a}.output.ids.0}}", estimated_cost=0.1),
        node(c, "format", subnet="sn1", text=f"{{{{${{{b}.output.text}}}}}} and ${{{a}.output.ids}}"),
    ]
    return plan(
        *[nodes[i] for i in order], *extra, edges=f"{a}>{c}", output_node=c, error_handling={b: {"retry_count": 2}}
    )


def test_renamed_reordered_and_dead_nodes_do_not_make_a_plan_new():
    original = plan_digest(_three_steps())
    assert original is not None
    assert plan_digest(_three_steps("x1", "y-2", "z_3")) == original
    assert plan_digest(_three_steps(order=(2, 0, 1))) == original
    junk = node("junk", "search", subnet="sn5", query="anything")
    assert plan_digest(_three_steps(extra=(junk,))) == original
    assert plan_digest(_three_steps("p", "q", "r", order=(1, 2, 0), extra=(junk,))) == original


def test_declared_estimates_do_not_change_the_digest_but_the_program_does():
    base = _three_steps()
    estimated = base.model_copy(deep=True)
    estimated.nodes[0].estimated_cost = 9.0
    assert plan_digest(estimated) == plan_digest(base)
    assert plan_digest(base.model_copy(update={"max_parallel": 1})) == plan_digest(base)  # schedules, same program
    for change in (
        lambda p: setattr(p.nodes[1], "subnet", "sn9"),
        lambda p: p.nodes[2].params.update(text="other"),
        lambda p: p.error_handling.clear(),
    ):
        changed = base.model_copy(deep=True)
        change(changed)
        assert plan_digest(changed) != plan_digest(base)


def test_a_node_wired_to_a_different_upstream_is_a_different_program():
    one = plan(node("a", query="1"), node("b", query="2"), node("c", text="${a.output.text}"), output_node="c")
    two = plan(node("a", query="1"), node("b", query="2"), node("c", text="${b.output.text}"), output_node="c")
    assert plan_digest(one) != plan_digest(two)


def test_a_plan_without_one_canonical_form_has_no_digest():
    assert plan_digest(plan(node("a", text="${b.output.text}"), node("b", text="${a.output.text}"))) is None
    assert plan_digest(plan(node("a", text="${ghost.output.text}"))) is None
    assert plan_digest(plan(node("a"), node("a"))) is None


def test_a_steps_margin_is_each_answers_own():
    """Nothing is divided among copies on a step: a win or a loss is the answer's own."""
    same = Answer("d1", 0.90)
    step = credits({1: same, 2: same, 3: Answer("d2", 0.86), 4: Answer(None, 0.0)}, 0.80)
    assert [step[uid].margin for uid in (1, 2, 3, 4)] == pytest.approx([0.10, 0.10, 0.06, -0.80])


def _steps(*rows: dict[int, tuple[str | None, float]], reference: float | list[float] = 0.80):
    """(step, answers, reference S) for :func:`network_pay` from per-step {uid: (digest, S)}."""
    refs = reference if isinstance(reference, list) else [reference] * len(rows)
    return [(k, {uid: Answer(d, s) for uid, (d, s) in row.items()}, refs[k]) for k, row in enumerate(rows)]


def _window(uid_answers: dict[int, list[tuple[str | None, float]]], reference: list[float]):
    """Steps from each uid's list of (digest, S), one per step."""
    n = len(reference)
    return [(k, {uid: Answer(*answers[k]) for uid, answers in uid_answers.items()}, reference[k]) for k in range(n)]


REFERENCE = [0.80, 0.0, 0.80, 0.75, 0.80, 0.80, 0.0, 0.80, 0.70, 0.80]
"""A window of ten steps: the reference fails two, and does worse on two others."""


def _learner(k: int) -> tuple[str, float]:
    """A planner that changes its plan every step and beats the reference by 0.05, never loses."""
    return (f"learned-{k}", REFERENCE[k] + 0.05)


def test_copies_and_variants_follow_the_first_committed_and_earn_nothing():
    """4 exact copies (later in first-commit order) and a variant within ε: the honest
    learner keeps all it earned alone, the copies get no credit, no floor, and no loss."""
    alone = network_pay(_window({1: [_learner(k) for k in range(10)]}, REFERENCE))
    copied = {
        1: [_learner(k) for k in range(10)],
        **{c: [_learner(k) for k in range(10)] for c in (2, 3, 4, 5)},
        6: [(f"variant-{k}", _learner(k)[1] - 0.004) for k in range(10)],
    }
    pay = network_pay(_window(copied, REFERENCE), order=[1, 2, 3, 4, 5, 6])
    assert pay.leaders == {uid: 1 for uid in range(1, 7)}
    assert pay.paid.weights == alone.paid.weights == {1: pytest.approx(1.0)}


def test_the_earliest_takes_the_group_whatever_its_uid_and_a_newcomer_displaces_it_only_by_epsilon():
    window = {5: [_learner(k) for k in range(10)], 2: [_learner(k) for k in range(10)]}
    assert network_pay(_window(window, REFERENCE), order=[5, 2]).leaders == {5: 5, 2: 5}
    ahead = {5: [_learner(k) for k in range(10)], 2: [(f"mine-{k}", _learner(k)[1] + 0.004) for k in range(10)]}
    assert network_pay(_window(ahead, REFERENCE), order=[5, 2]).leaders[2] == 5  # within ε: a copy
    # The same programs run faster (a max_parallel that no longer binds): more than ε ahead.
    faster = {5: [_learner(k) for k in range(10)], 2: [(_learner(k)[0], _learner(k)[1] + 0.02) for k in range(10)]}
    pay = network_pay(_window(faster, REFERENCE), order=[5, 2])
    assert pay.leaders == {5: 2, 2: 2} and set(pay.paid.weights) == {2}


def test_different_planners_are_different_groups():
    """Two planners with the same mean but different answers step by step are both paid."""
    window = {
        1: [(f"a{k}", REFERENCE[k] + (0.10 if k % 2 else 0.02)) for k in range(10)],
        2: [(f"b{k}", REFERENCE[k] + (0.02 if k % 2 else 0.10)) for k in range(10)],
    }
    pay = network_pay(_window(window, REFERENCE))
    assert pay.leaders == {1: 1, 2: 2}
    assert pay.paid.weights[1] == pytest.approx(pay.paid.weights[2]) == pytest.approx(0.5)


SCORE = st.floats(0, 1, allow_nan=False)


@given(
    st.lists(st.tuples(st.sampled_from("abc"), SCORE), min_size=1, max_size=6),
    SCORE,
    st.integers(2, 5),
    st.booleans(),
    st.lists(st.integers(0, 60), unique=True, min_size=1, max_size=8),
)
def test_copies_never_earn_more_together_than_one_of_them_alone(others, reference, copies, burn, order):
    """A network where one hotkey sends ``x`` against the same network where ``copies``
    hotkeys send it, in any first-commit order: the copies together never exceed the one.
    The one commits when the earliest copy does (``x``'s first commit is the same in both
    networks: a hotkey registered later cannot have sent it before the one it copies)."""
    burn_uid = 99 if burn else None

    copy_uids = range(50, 50 + copies)

    def network(n: int, first_commits: list[int]) -> dict[int, float]:
        answers = {uid: Answer(digest, score) for uid, (digest, score) in enumerate(others)}
        answers |= {50 + k: Answer("x", 0.95) for k in range(n)}
        steps = [(k, answers, reference) for k in range(3)]
        return network_pay(steps, first_commits, burn_uid=burn_uid).paid.weights

    earliest = next((k for k, uid in enumerate(order) if uid in copy_uids), None)
    one = [uid for uid in order if uid not in copy_uids]
    if earliest is not None:
        one.insert(sum(uid not in copy_uids for uid in order[:earliest]), 50)
    alone = network(1, one).get(50, 0.0)
    together = math.fsum(network(copies, order).get(50 + k, 0.0) for k in range(copies))
    assert together <= alone + 1e-12


def _network(better: float, copies: int, *, naive: bool = False, steps: int = 10) -> dict[int, float]:
    """``copies`` miners sending the reference's plan (margin 0, S 0.80), one ``better``
    ahead on every step (a different plan each step), and a naive chain 0.05 below."""
    rows = []
    for k in range(steps):
        row = {uid: ("reference", 0.80) for uid in range(copies)}
        if better:
            row[100] = (f"better-{k}", 0.80 + better)
        if naive:
            row[200] = ("naive", 0.75)
        rows.append(row)
    return network_pay(_steps(*rows)).paid.weights


def test_the_issues_networks():
    assert _network(0.024, 63)[100] == pytest.approx(1 - FLOOR)
    assert _network(0.008, 7)[100] == pytest.approx(1 - FLOOR)
    pair = _network(0.0, 2)
    assert pair == {0: pytest.approx(1.0)}  # the first committed holds the answer's floor; its copy nothing
    for better, copies in ((0.024, 63), (0.008, 7), (0.0, 2)):
        weights = _network(better, copies, naive=True)
        assert 0 < weights[200] < weights[0]


def test_the_reference_plan_earns_at_most_the_floor_when_anyone_beats_it():
    weights = _network(0.01, 1)
    assert weights[0] <= FLOOR and weights[100] == pytest.approx(1 - FLOOR)


def test_a_margin_within_its_standard_error_is_not_paid():
    """Ahead on average, but by less than its noise: the dice, not planning."""
    noisy = window_means([0.8] * 4, tallies([0.5, -0.45, 0.5, -0.45]))
    assert noisy.margin > 0 and noisy.clear < 0
    steady = window_means([0.8] * 4, tallies([0.03, 0.02, 0.03, 0.02]))
    paid = margin_weights({1: noisy, 2: steady}).weights
    assert paid[2] == pytest.approx(1 - FLOOR) and paid[1] == pytest.approx(FLOOR)
    assert window_means([0.8] * 4, tallies([0.1])).clear == -math.inf  # one step says nothing of its noise


def test_the_floor_is_monotone_in_s_and_pays_no_premium_for_being_distinct():
    means = {
        1: Means(0.80, 0.0, 0.0),
        2: Means(0.80, -0.01, 0.01),
        3: Means(0.70, -0.10, 0.01),
        4: Means(0.0, -0.8, 0.0),
    }
    floor = margin_weights(means).weights  # 1 a copy of the reference, 2 distinct at the same S, 3 worse, 4 nothing
    assert floor[1] == pytest.approx(floor[2]) and floor[3] < floor[1] and 4 not in floor


def test_a_window_that_scored_on_one_lucky_step_earns_no_floor():
    """A stored answer that happened to fit one drawn instance of a hundred: its mean S
    (0.007) equals its standard error, the dice. One that scores on a tenth of its steps
    is clear of its error and shares the floor by its mean S, as any other does."""
    lucky = window_means([0.7] + [0.0] * 99, tallies([-0.8] * 100))
    assert lucky.score > 0 and lucky.floor_score == 0.0
    rare = window_means(([0.7] + [0.0] * 9) * 10, tallies([-0.8] * 100))
    honest = window_means([0.7] * 100, tallies([-0.1] * 100))
    paid = margin_weights({1: lucky, 2: rare, 3: honest}).weights
    assert 1 not in paid and paid[2] == pytest.approx(paid[3] / 10)
    played = [(k, {1: Answer("stored", 0.7 if k == 0 else 0.0), 2: Answer(f"plan-{k}", 0.7)}, 0.8) for k in range(100)]
    assert network_pay(played).paid.weights == {2: 1.0}
    # Until anyone's score is clear (two steps, each miner scored on one), the floor goes by mean S.
    early = {1: window_means([0.8, 0.0], tallies([0.0, -0.8])), 2: window_means([0.0, 0.4], tallies([-0.8, -0.4]))}
    assert margin_weights(early).weights == pytest.approx({1: 2 / 3, 2: 1 / 3})


def test_when_nobody_beats_the_reference_the_fallback_still_sets_weights():
    means = {0: Means(0.8, 0.0), 1: Means(0.8, 0.0), 2: Means(0.0, -0.8)}
    burned = margin_weights(means, burn_uid=7)
    assert burned.payout is Payout.BURN
    assert burned.weights == pytest.approx({7: 1 - FLOOR, 0: FLOOR / 2, 1: FLOOR / 2})
    floor_only = margin_weights(means)
    assert floor_only.payout is Payout.FLOOR_ONLY and floor_only.weights == pytest.approx({0: 0.5, 1: 0.5})
    nobody = margin_weights({}, burn_uid=7)
    assert nobody.payout is Payout.BURN and nobody.weights == {7: 1.0}
    assert margin_weights({}).payout is Payout.NOTHING


def test_earnings_grow_with_how_far_and_how_reliably_a_miner_beats_the_reference():
    far = margin_weights({1: Means(0.82, 0.02), 2: Means(0.84, 0.04)}).weights
    assert far[2] == pytest.approx(2 * far[1])
    # The same best step, but one miner also loses on others: its mean margin is lower, its error larger.
    steady = window_means([0.83] * 4, tallies([0.03] * 4))
    erratic = window_means([0.82] * 4, tallies([0.06, 0.0, 0.06, 0.0]))
    weights = margin_weights({1: steady, 2: erratic}).weights
    assert weights[1] > weights[2] > 0
    assert window_means([0.8] * 4, tallies([])) == Means(0.8, 0.0, math.inf, K_SE, 0.0)  # no step with a reference yet


def test_a_stricter_k_se_pays_only_margins_clear_of_more_noise():
    """Ahead by 0.05 with a standard error of 0.029: clear of one error, not of two. The
    window's means carry the rule they are judged by, through network_pay and the leaders."""
    margins = [0.1, 0.0, 0.1, 0.0]
    assert (
        window_means([0.8] * 4, tallies(margins), k_se=1.0).clear
        > 0
        > window_means([0.8] * 4, tallies(margins), k_se=2.0).clear
    )
    steps = [(k, {1: Answer(f"a{k}", 0.8 + m), 2: Answer("ref", 0.8)}, 0.8) for k, m in enumerate(margins)]
    assert network_pay(steps, k_se=1.0).paid.payout is Payout.MARGIN
    strict = network_pay(steps, k_se=2.0)
    assert strict.paid.payout is Payout.FLOOR_ONLY and strict.means[1].k_se == bar(2.0, 4)


def test_a_copy_registered_after_its_group_changed_leader_still_follows_it():
    """Hypothesis found it: 'x' (0.95) joins 'a' (0.953) as within ε; a later 'a' at 1.0
    displaces the leader and takes the group, 'x' with it. A second 'x' registered after
    that is far from the new leader (0.05): matched leader to member only, it led a group
    of its own and was paid 0.487 where one 'x' got nothing. It is the first 'x''s copy."""
    answers = {0: Answer("a", 0.953125), 1: Answer("a", 1.0), 50: Answer("x", 0.95), 51: Answer("x", 0.95)}
    steps = [(k, answers, 0.0) for k in range(3)]
    pay = network_pay(steps, [0, 50])
    assert pay.leaders == {0: 1, 1: 1, 50: 1, 51: 1}
    assert set(pay.paid.weights) == {1}


MISSED = (None, 0.0)
"""A step a miner sent no plan on (its query timed out, its reply was invalid): no digest,
no outcome, S 0."""


@pytest.mark.parametrize("missed_by", [1, 2], ids=["the-original", "the-copy"])
def test_a_copy_is_one_answer_with_its_original_whichever_missed_a_step(missed_by: int):
    """The e2e network of test_validator_margin once, under load: the original's query
    timed out on the second of four steps. That step is its 0 S, not another answer; the
    copy was paid as a group of its own (0.518 beside the original's 0.397)."""
    scores = [0.75, 0.79, 0.77, 0.0]
    rows = [{1: (f"p{k}", s), 2: (f"p{k}", s), 3: ("naive", 0.72 if k == 1 else 0.0)} for k, s in enumerate(scores)]
    rows[1][missed_by] = MISSED
    pay = network_pay(_steps(*rows, reference=scores), order=[1, 2, 3])
    assert pay.leaders == {1: 1, 2: 1, 3: 3}
    assert 2 not in pay.paid.weights and pay.paid.weights[1] > 0


def test_a_leader_that_keeps_missing_steps_is_displaced_by_its_copy_that_answers_them():
    """Missed steps are matched over by neither, but each is its miner's 0 S in who is
    ahead: an original that answered one step in ten (and so was first seen sending it)
    does not hold the answer its copy sends on every step."""
    rows = [{1: MISSED if k else ("p", 0.8), 2: ("p", 0.8)} for k in range(10)]
    pay = network_pay(_steps(*rows), order=[1, 2])
    assert pay.leaders == {1: 2, 2: 2} and set(pay.paid.weights) == {2}


def test_miners_that_never_answered_the_same_step_are_not_one_answer():
    """No step both answered: nothing says they send one answer, whatever their S."""
    rows = [{1: ("p", 0.8) if k % 2 else MISSED, 2: MISSED if k % 2 else ("q", 0.8)} for k in range(6)]
    assert network_pay(_steps(*rows), order=[1, 2]).leaders == {1: 1, 2: 2}
