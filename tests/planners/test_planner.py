"""Reference planners: what a miner operator relies on when picking ``--planner``."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planners import REFERENCE_PLANNERS, GoodPlanner, PlannerLoadError, PlanningError, load_planner
from protocol.dataref import find_refs
from protocol.synapse import TaskPackage, WorkflowSynapse
from protocol.validation import check_plan, check_plan_for
from support.scale import examples
from tasks import load_families

PACKAGES = [found.package for found in load_families()]
"""What miners are sent: every shipped v2 family (its public example included)."""


def _package(tools: dict, steps: list[dict], *, allowed=None, budget=1.0, latency=4.0, routing=None):
    return TaskPackage.model_validate(
        {
            "task_id": "t1",
            "task_type": "agent",
            "constraints": {
                "max_budget_tao": budget,
                "max_latency_seconds": latency,
                "allowed_subnets": allowed if allowed is not None else list(tools),
            },
            "available_tools": tools,
            "routing_policy": routing or {},
            "steps": steps,
        }
    )


def _step(step_id: str, kind: str = "math", **params) -> dict:
    return {"id": step_id, "action": "calculator", "kind": kind, "params": params or {"expression": "1+1"}}


def _subnets(proposal) -> dict[str, str]:
    return {node.id: node.subnet for node in proposal.plan.nodes}


def _edges(proposal) -> set[tuple[str, str]]:
    return {(edge.source, edge.to) for edge in proposal.plan.edges}


def _ref_edges(package: TaskPackage) -> set[tuple[str, str]]:
    return {(ref.node_id, step.id) for step in package.steps for ref in find_refs(step.params) if not ref.is_input}


# --- both strategies on the whole benchmark set -------------------------------------


@pytest.mark.parametrize("strategy", REFERENCE_PLANNERS)
def test_every_benchmark_family_gets_a_valid_plan_within_allowed_subnets(strategy):
    planner = load_planner(strategy)
    for package in PACKAGES:
        proposal = planner.plan(package)
        check = check_plan_for(proposal.plan, package)
        assert check.valid, (package.task_id, check.errors, check.node_errors)
        answer = WorkflowSynapse.model_validate(
            {
                **package.model_dump(),
                "miner_uid": 0,
                "workflow_plan": proposal.plan.to_wire(),
                "total_estimated_cost": proposal.total_estimated_cost,
                "total_estimated_latency": proposal.total_estimated_latency,
                "confidence": proposal.confidence,
                "reasoning": proposal.reasoning,
            }
        )
        assert answer.reasoning and 0 <= answer.confidence <= 1
        if "found by search" in proposal.reasoning:  # good took a shorter program than the hints
            assert len(proposal.plan.nodes) < len(package.steps), package.task_id
        else:
            assert proposal.plan.output_node == package.steps[-1].id


def test_good_edges_are_exactly_the_datarefs_and_params_are_untouched():
    planner = GoodPlanner(shorter=False)  # the hints as given, no search for a shorter program
    for package in PACKAGES:
        proposal = planner.plan(package)
        assert _edges(proposal) == _ref_edges(package), package.task_id
        assert [node.params for node in proposal.plan.nodes] == [step.params for step in package.steps]


def test_naive_is_a_chain_in_listed_order_on_first_listed_subnets_without_retries():
    planner = load_planner("naive")
    for package in PACKAGES:
        proposal = planner.plan(package)
        ids = [step.id for step in package.steps]
        assert [node.id for node in proposal.plan.nodes] == ids
        # the chain, and the references (the builder adds them; the chain implies them)
        assert _edges(proposal) == set(zip(ids, ids[1:])) | _ref_edges(package)
        assert proposal.plan.error_handling == {}
        listing = list(package.available_tools)
        for node, step in zip(proposal.plan.nodes, package.steps):
            first = next(s for s in listing if package.available_tools[s].type == step.kind)
            assert node.subnet == first
        assert [node.params for node in proposal.plan.nodes] == [step.params for step in package.steps]


# --- subnet choice on hand-made packages --------------------------------------------


def test_good_weighs_cost_against_latency_at_the_rates_the_score_pays():
    # S pays 0.25 per budget left and 0.15 per latency limit left: the best subnet
    # depends on how much of each limit it takes.
    tools = {
        "pricey_fast": {"type": "math", "avg_cost": 0.05, "avg_latency": 0.01},
        "cheap_slow": {"type": "math", "avg_cost": 0.001, "avg_latency": 3.0},
        "mid": {"type": "math", "avg_cost": 0.01, "avg_latency": 0.2},
        "banned_cheapest": {"type": "math", "avg_cost": 0.0001, "avg_latency": 0.01},
        "text": {"type": "text", "avg_cost": 0.0, "avg_latency": 0.0},
    }
    allowed = ["pricey_fast", "cheap_slow", "mid", "text"]

    def pick(budget: float, latency: float) -> str:
        package = _package(tools, [_step("a")], allowed=allowed, budget=budget, latency=latency)
        return _subnets(load_planner("good").plan(package))["a"]

    assert pick(budget=1.0, latency=2.0) == "pricey_fast"  # 5 % of the budget buys 9 % of the limit
    assert pick(budget=0.1, latency=2.0) == "mid"
    assert pick(budget=0.02, latency=100.0) == "cheap_slow"
    # cheapest by far, but 3 s is over the latency cap (0.8 of the limit)
    assert pick(budget=0.02, latency=3.5) == "mid"


def test_good_speeds_up_only_the_critical_path():
    tools = {
        "slow": {"type": "math", "avg_cost": 0.001, "avg_latency": 0.25},
        "fast": {"type": "math", "avg_cost": 0.01, "avg_latency": 0.1},
    }
    chain = [_step("a"), _step("b", expression="${a.output.text} + 1"), _step("c", expression="${b.output.text} + 1")]
    chosen = _subnets(load_planner("good").plan(_package(tools, [*chain, _step("side")], latency=2.0)))
    assert chosen == {"a": "fast", "b": "fast", "c": "fast", "side": "slow"}


def test_good_moves_parallel_branches_together():
    # Either branch alone on the fast subnet leaves the critical path as long.
    tools = {
        "slow": {"type": "math", "avg_cost": 0.001, "avg_latency": 1.0},
        "fast": {"type": "math", "avg_cost": 0.002, "avg_latency": 0.1},
    }
    steps = [_step("left"), _step("right"), _step("join", expression="${left.output.text} + ${right.output.text}")]
    chosen = _subnets(load_planner("good").plan(_package(tools, steps, latency=10.0)))
    assert chosen == {"left": "fast", "right": "fast", "join": "fast"}


def test_good_falls_back_to_the_fastest_when_nothing_fits():
    tools = {
        "slow": {"type": "math", "avg_cost": 0.001, "avg_latency": 5.0},
        "less_slow": {"type": "math", "avg_cost": 0.01, "avg_latency": 3.0},
    }
    proposal = load_planner("good").plan(_package(tools, [_step("a")], latency=2.0))
    assert _subnets(proposal) == {"a": "less_slow"}
    assert proposal.confidence < 0.5


def test_good_does_not_upgrade_beyond_the_budget():
    tools = {
        "slow": {"type": "math", "avg_cost": 0.01, "avg_latency": 3.0},
        "fast": {"type": "math", "avg_cost": 0.5, "avg_latency": 0.1},
    }
    proposal = load_planner("good").plan(_package(tools, [_step("a")], latency=2.0, budget=0.2))
    assert _subnets(proposal) == {"a": "slow"}


def test_good_prices_flaky_subnets_with_their_retries_and_declares_them():
    tools = {
        "flaky_cheap": {"type": "math", "avg_cost": 0.002, "avg_latency": 0.1, "fail_first": 2},
        "steady": {"type": "math", "avg_cost": 0.005, "avg_latency": 0.1},
        "flaky_cheaper": {"type": "math", "avg_cost": 0.001, "avg_latency": 0.1, "fail_first": 1},
    }
    proposal = load_planner("good").plan(_package(tools, [_step("a")], latency=100.0))
    # 3 attempts x 0.002 = 0.006 > 0.005 > 2 attempts x 0.001 = 0.002; latency is no object
    assert _subnets(proposal) == {"a": "flaky_cheaper"}
    policy = proposal.plan.error_handling["a"]
    assert policy.retry_count >= 1
    assert policy.timeout_seconds is not None and policy.timeout_seconds > 0.1
    assert proposal.total_estimated_cost == pytest.approx(0.002)
    expensive = {k: v for k, v in tools.items() if k != "flaky_cheaper"}
    assert _subnets(load_planner("good").plan(_package(expensive, [_step("a")], latency=100.0))) == {"a": "steady"}


def test_routing_top_k_multiplies_the_cost_estimate():
    tools = {"m": {"type": "math", "avg_cost": 0.01, "avg_latency": 0.1}}
    package = _package(tools, [_step("a")], routing={"m": {"top_k": 3}})
    for strategy in REFERENCE_PLANNERS:
        assert load_planner(strategy).plan(package).total_estimated_cost == pytest.approx(0.03)


def test_good_runs_independent_steps_in_parallel_and_estimates_the_critical_path():
    tools = {"m": {"type": "math", "avg_cost": 0.001, "avg_latency": 0.2}}
    steps = [
        _step("x"),
        _step("y"),
        _step("z"),
        _step("sum", expression="${x.output.text} + ${y.output.text} + ${z.output.text}"),
    ]
    package = _package(tools, steps)
    good, naive = load_planner("good").plan(package), load_planner("naive").plan(package)
    assert _edges(good) == {("x", "sum"), ("y", "sum"), ("z", "sum")}
    assert good.plan.max_parallel == 3
    assert good.total_estimated_latency == pytest.approx(0.4)
    assert naive.total_estimated_latency == pytest.approx(0.8)
    assert good.total_estimated_cost == pytest.approx(naive.total_estimated_cost)


# --- input the planners cannot plan -------------------------------------------------

_TOOLS = {"m": {"type": "math", "avg_cost": 0.001, "avg_latency": 0.1}}


@pytest.mark.parametrize("strategy", REFERENCE_PLANNERS)
@pytest.mark.parametrize(
    "steps, allowed, message",
    [
        ([], None, "no steps"),
        ([_step("a"), _step("a")], None, "duplicate step id 'a'"),
        ([_step("a", kind="vision")], None, "no allowed subnet offers kind 'vision'"),
        ([_step("a")], ["elsewhere"], "no allowed subnet offers kind 'math'"),
        ([_step("a", expression="${a.out")], None, "invalid DataRef syntax"),
        # the builder checks every reference: an input the schema does not declare, an
        # output the action does not have, a step that does not run before
        ([_step("a", expression="${input.missing}")], None, re.escape('PARENT["missing"] is not a value')),
        ([_step("a"), _step("b", expression="${a.output.artifacts.metadata.nope}")], None, "no output 'nope'"),
        ([_step("a", expression="2 * ${a.output.text}")], None, "not the output of a step that runs before it"),
    ],
)
def test_unplannable_packages_raise_a_clear_planning_error(strategy, steps, allowed, message):
    package = _package(_TOOLS, steps, allowed=allowed)
    with pytest.raises(PlanningError, match=message):
        load_planner(strategy).plan(package)


def test_good_reports_steps_whose_refs_form_a_cycle():
    steps = [_step("a", expression="${b.output.text}"), _step("b", expression="${a.output.text}")]
    with pytest.raises(PlanningError, match="cycle: a -> b -> a"):
        load_planner("good").plan(_package(_TOOLS, steps))


def test_get_planner_names_the_known_strategies():
    assert {load_planner(name).name for name in REFERENCE_PLANNERS} == {"good", "naive"}
    with pytest.raises(PlannerLoadError, match="good, naive"):
        load_planner("clever")
    with pytest.raises(ValueError):
        GoodPlanner(latency_headroom=0)


# --- arbitrary packages ---------------------------------------------------------------

_IDS = st.sampled_from(["a", "b", "c", "d", "e"])
_KINDS = st.sampled_from(["math", "text", "data"])
_NUMBER = st.one_of(st.floats(0, 1e308), st.floats(0, 1))


@st.composite
def _packages(draw):
    tools = draw(
        st.dictionaries(
            st.sampled_from(["s1", "s2", "s3", "s4"]),
            st.fixed_dictionaries(
                {"type": _KINDS, "avg_cost": _NUMBER, "avg_latency": _NUMBER, "fail_first": st.integers(0, 10)}
            ),
            max_size=4,
        )
    )
    refs = st.lists(_IDS.map(lambda i: "${%s.output.text}" % i), max_size=3).map(" ".join)
    steps = draw(st.lists(st.builds(lambda i, k, r: _step(i, k, expression=r or "1"), _IDS, _KINDS, refs), max_size=6))
    allowed = draw(st.one_of(st.none(), st.lists(st.sampled_from(["s1", "s2", "s3", "s9"]), max_size=3)))
    routing = draw(st.dictionaries(st.sampled_from(["s1", "default"]), st.builds(dict, top_k=st.integers(1, 16))))
    latency = draw(st.floats(0.01, 1e6))
    return TaskPackage.model_validate(
        {
            "task_id": "h",
            "task_type": "agent",
            "constraints": {"max_latency_seconds": latency, "allowed_subnets": allowed},
            "available_tools": tools,
            "routing_policy": routing,
            "steps": steps,
        }
    )


@pytest.mark.parametrize("strategy", REFERENCE_PLANNERS)
@settings(max_examples=examples(150), deadline=None)
@given(package=_packages())
def test_any_package_gets_a_runnable_plan_or_a_planning_error(strategy, package):
    try:
        proposal = load_planner(strategy).plan(package)
    except PlanningError:
        return
    check = check_plan(proposal.plan, allowed_subnets=package.constraints.allowed_subnets)
    assert check.runnable, check.errors
    assert 0 <= proposal.confidence <= 1
    assert math.isfinite(proposal.total_estimated_cost + proposal.total_estimated_latency)
    if strategy == "good":
        ids = {step.id for step in package.steps}
        assert _edges(proposal) == {(a, b) for a, b in _ref_edges(package) if a != b and a in ids}
