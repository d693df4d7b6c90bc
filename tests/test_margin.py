"""Paid for beating the reference (scoring/margin.py, protocol/canonical.py): copies are one
answer whatever their node names, order or dead nodes; the floor, the fallback and the
shares the issue's networks need."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.canonical import plan_digest
from protocol.plan import WorkflowPlan
from scoring.margin import FLOOR, Answer, Means, Payout, credits, margin_weights, window_means
from tests.support.plans import node, plan


def _three_steps(a: str = "a", b: str = "b", c: str = "c", *, order=(0, 1, 2), extra: tuple[dict, ...] = ()) -> WorkflowPlan:
    nodes = [
        node(a, "search", subnet="sn5", query="${input.q}"),
        node(b, "fetch", subnet="sn2", doc=f"${{{a}.output.ids.0}}", estimated_cost=0.1),
        node(c, "format", subnet="sn1", text=f"{{{{${{{b}.output.text}}}}}} and ${{{a}.output.ids}}"),
    ]
    return plan(*[nodes[i] for i in order], *extra, edges=f"{a}>{c}", output_node=c,
                error_handling={b: {"retry_count": 2}})


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
    for change in (
        lambda p: setattr(p.nodes[1], "subnet", "sn9"),
        lambda p: p.nodes[2].params.update(text="other"),
        lambda p: p.error_handling.clear(),
        lambda p: setattr(p, "max_parallel", 1),
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


def test_copies_share_a_positive_margin_and_keep_their_own_losses():
    same = Answer("d1", 0.90)
    step = credits({1: same, 2: same, 3: Answer("d2", 0.86), 4: Answer("d3", 0.70), 5: Answer(None, 0.0)}, 0.80)
    assert step[1].margin == step[2].margin == pytest.approx(0.05) and step[1].share == 0.5
    assert step[3].margin == pytest.approx(0.06) and step[3].share == 1.0
    assert step[4].margin == pytest.approx(-0.10) and step[5].margin == pytest.approx(-0.80)


def test_variants_that_ran_the_same_are_copies_too():
    """An operator's hotkeys each sending its own variant of one better plan (an extra
    retry that never fires, another max_parallel): different digests, the same S and
    final output — one answer, joined transitively with the digest copies."""
    step = credits({
        1: Answer("plan", 0.90, "ran-a"), 2: Answer("variant", 0.90, "ran-a"), 3: Answer("plan", 0.90, "ran-a"),
        4: Answer("other", 0.90, "ran-b"), 5: Answer(None, 0.0, None), 6: Answer(None, 0.0, None),
    }, 0.80)
    assert [step[uid].share for uid in (1, 2, 3)] == [1 / 3] * 3 and step[1].margin == pytest.approx(0.1 / 3)
    assert step[4].share == 1.0 and step[4].margin == pytest.approx(0.1)
    assert step[5].share == step[6].share == 1.0  # no plan, no run: nothing to be a copy of


SCORE = st.floats(0, 1, allow_nan=False)


@given(st.lists(st.tuples(st.sampled_from("abc"), SCORE), min_size=1, max_size=6), SCORE, st.integers(2, 5), st.booleans())
def test_copies_never_earn_more_together_than_one_of_them_alone(others, reference, copies, burn):
    """A network where one hotkey sends digest ``x`` against the same network where
    ``copies`` hotkeys send it: the copies' weights together never exceed the one's."""
    burn_uid = 99 if burn else None

    def network(n: int) -> dict[int, float]:
        answers = {uid: Answer(digest, score) for uid, (digest, score) in enumerate(others)}
        answers |= {50 + k: Answer("x", 0.95) for k in range(n)}
        return margin_weights(_means(answers, reference), burn_uid=burn_uid).weights

    alone = network(1).get(50, 0.0)
    together = math.fsum(network(copies).get(50 + k, 0.0) for k in range(copies))
    assert together <= alone + 1e-12


def _network(better: float, copies: int, *, naive: bool = False) -> dict[int, float]:
    """``copies`` miners sending the reference's plan (margin 0, S 0.80), one ``better``
    ahead, and a naive chain 0.05 below when asked; the window means of one step."""
    answers = {uid: Answer("reference", 0.80) for uid in range(copies)}
    if better:
        answers[100] = Answer("better", 0.80 + better)
    if naive:
        answers[200] = Answer("naive", 0.75)
    return margin_weights(_means(answers, 0.80)).weights


def _means(answers: dict[int, Answer], reference: float) -> dict[int, Means]:
    """The window means of a one-step window."""
    step = credits(answers, reference)
    return {uid: Means(answers[uid].score, step[uid].margin, step[uid].share) for uid in answers}


def test_the_issues_networks():
    assert _network(0.024, 63)[100] >= 0.5  # 3 % better than 0.80 against 63 copies
    assert _network(0.008, 7)[100] >= 0.3  # 1 % better against 7
    pair = _network(0.0, 2)
    assert pair[0] == pytest.approx(0.5) and pair[1] == pytest.approx(0.5)
    for better, copies in ((0.024, 63), (0.008, 7), (0.0, 2)):
        weights = _network(better, copies, naive=True)
        assert weights[200] < weights[0]


def test_the_reference_plan_earns_at_most_the_floor_when_anyone_beats_it():
    weights = _network(0.01, 1)
    assert weights[0] <= FLOOR and weights[100] == pytest.approx(1 - FLOOR)


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
    # The same best step, but one miner also loses on others: its mean margin is lower.
    steady = window_means(0.83, [0.03] * 4, [1.0] * 4)
    erratic = window_means(0.82, [0.06, -0.02, 0.06, -0.02], [1.0] * 4)
    weights = margin_weights({1: steady, 2: erratic}).weights
    assert weights[1] > weights[2] > 0
    assert window_means(0.8, [], []) == Means(0.8, 0.0, 1.0)  # no step with a reference yet
