"""Issue 21's attacks at every hint tier, and a miner that keeps a table of the 40 curated plans.

A validator sends a package at a tier (``full``, ``outline`` or ``goal``) and scores the plan
on a hidden instance whatever the tier (docs/tasks.md, "Hint tiers"), so every attack here
is built from the package *as sent at that tier* and scored on the hidden instance (seed
``HIDDEN``) by the validator's owned execution:

- ``precompute``: :class:`~planners.attackers.PrecomputePlanner` on the tiered package
  (the reference of the public example it recognises by the description);
- ``memorise:i``: public example ``i``'s ``output``, emitted by one node
  (:func:`~planners.attackers.answer_plan`); every tier carries the examples;
- for code families, forged code: ``lookup``, a module whose entry point returns the
  examples' expected values by lookup and its first argument otherwise; ``forged summary``,
  one that prints a passing test summary (at import and in the call) and exits 0.

None computes from the hidden instance's inputs, and on every tier every one scores 0 on
the hidden instance (seed ``HIDDEN``). Two rules of the tasks make it so, each once a
hole these tests found:

- agent: a number of the answer is found as a whole token only (a ``regex`` item; a
  substring ``keyword`` credited the hidden ``3`` inside an example's ``134``,
  S 0.225 on agent_difference_firms);
- code: no hidden call is one a constant-free guess answers (``rotate([57])`` is
  ``[57]`` whatever the shift, ``count_above([])`` is 0 whatever the limit): such calls
  gave a lookup module one case in six, S 0.225 on code_rotate.

Over 200 hidden instances of each code family, curated and drawn, a lookup module with a
constant-free fallback is right on half the calls at most and never opens the efficiency
gate (:func:`test_a_lookup_module_with_a_constant_free_guess_stays_under_the_gate_and_naive`).

The table-of-40 miner (:class:`TableMiner`) keeps ``good``'s plan for each curated family
and answers a package it does not know with the plan of the curated family of the same
type whose description is closest, its subnets remapped. On the 40 drawn families, at
every tier, it must score no more than the naive chain on the same hidden instance (the
bar: naive's S, or naive+retries' where naive scores 0 by a flaky first subnet, as in
tests/attacks/test_one_node_attacks.py). Measured at ``HIDDEN``: S 0 on all 40 at every tier. Before
the grammar drew many program shapes (and drawn lookups stopped reporting the subjects'
names): 0.35 (quality 0.5: the two subjects' keys right, the combined figure under another
key) on two agent families whose wording is close to agent_total_rivers', bars 0.75 and 0.78.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from difflib import SequenceMatcher
from typing import Any

import pytest

from bench.tasks import CHAINS, propose
from planners import PlanningError, PlanProposal, load_planner
from planners.attackers import PrecomputePlanner, answer_plan, example_answer
from planners.base import estimate
from protocol.hints import TIERS, HintTier
from protocol.plan import WorkflowPlan
from protocol.synapse import TaskPackage
from protocol.task import Task, at_tier
from support.attacks import gather, scored_run
from tasks import Family, load_families
from tasks.drawn import drawn_families
from tasks.family import Instance

pytestmark = pytest.mark.e2e


HIDDEN = 4242
CURATED = load_families()


def _drawn() -> tuple[Family, ...]:
    """The forty drawn families of (1, 0), drawn when a test runs, not at collection."""
    return drawn_families(1, 0, 40)


def _hidden(family: Family, tier: HintTier, seed: int = HIDDEN) -> Task:
    """The hidden instance of ``seed`` as the validator sends it at ``tier`` (and scores it)."""
    return at_tier(family.task(family.instance(seed)), tier)


def _answer(output: dict[str, Any]) -> str:
    """A public example's ``output`` as the answer a plan's final node emits."""
    if "cases" in output:
        return example_answer(output)
    if "text" in output:
        return str(output["text"])
    return json.dumps(output["json"])


def _cases(package: TaskPackage) -> tuple[str, list[dict[str, Any]]]:
    """A code package's entry point and every case its public examples show."""
    outputs = [example.output for example in package.examples]
    return outputs[0]["entry_point"], [case for output in outputs for case in output["cases"]]


FALLBACKS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "identity": ("args[0]", lambda argument: argument),
    "zero": ("0", lambda argument: 0),
    "len": ("len(args[0])", len),
    "empty list": ("[]", lambda argument: []),
}
"""What a lookup module answers a call it has not seen: constant-free guesses, each as the
module's expression and as the Python it stands for (on the call's one argument)."""


def _table(package: TaskPackage) -> dict[str, Any]:
    """The examples' calls (their arguments as JSON) and what each returned."""
    return {json.dumps(case["args"]): case["expected"] for case in _cases(package)[1]}


def _lookup(package: TaskPackage, fallback: str = "identity") -> str:
    """A module whose entry point answers the examples' calls by lookup, else ``fallback``."""
    expression, _ = FALLBACKS[fallback]
    return (
        f"import json\nTABLE = json.loads({json.dumps(json.dumps(_table(package)))})\n"
        f"def {_cases(package)[0]}(*args, **kwargs):\n"
        f"    key = json.dumps(list(args))\n"
        f"    return TABLE[key] if key in TABLE else {expression}\n"
    )


def _forged_summary(package: TaskPackage) -> str:
    """A module that reports every case passed, at import and when called, and exits 0."""
    entry, cases = _cases(package)
    report = f"{len(cases)} passed in 0.01s"
    return (
        f"import os, sys\n"
        f"def _report():\n"
        f"    sys.__stdout__.write({report!r} + '\\n'); sys.__stdout__.flush()\n"
        f"    os._exit(0)\n"
        f"sys.__stdout__.write({report!r} + '\\n'); sys.__stdout__.flush()\n"
        f"def {entry}(*args, **kwargs):\n"
        f"    _report()\n"
    )


PRECOMPUTE = PrecomputePlanner(CURATED)


def attacks(package: TaskPackage) -> dict[str, WorkflowPlan]:
    """Every attack of the module docstring a miner can build from ``package``, by name."""
    plans = {"precompute": PRECOMPUTE.plan(package).plan}
    for index, example in enumerate(package.examples):
        plans[f"memorise:{index}"] = answer_plan(package, _answer(example.output))
    if package.task_type == "code":
        plans["lookup"] = answer_plan(package, _lookup(package))
        plans["forged summary"] = answer_plan(package, _forged_summary(package))
    return plans


def _score(report: dict[str, Any]) -> dict[str, Any]:
    return {key: report["score"][key] for key in ("S", "output_quality")} | {"details": report["score"]["details"]}


async def _bar(family: Family, seed: int = HIDDEN) -> float:
    """The bar on the hidden instance of ``seed``: naive's S, or naive+retries' where naive
    scores 0 (its first listed subnet fails every first attempt: the profile, not the task)."""
    for strategy in CHAINS:
        proposal = propose(family, strategy)
        s = (await scored_run(proposal.plan, _hidden(family, "full", seed), proposal.total_estimated_cost))["score"][
            "S"
        ]
        if s > 0:
            break
    return s


def _bars(families: tuple[Family, ...]) -> dict[str, float]:
    """Each family's bar on its instance of :data:`HIDDEN`."""
    return dict(zip((f.task_id for f in families), asyncio.run(gather([_bar(f) for f in families]))))


@pytest.fixture(scope="module")
def attack_scores() -> Scores:
    """(tier, family, attack) -> S, output quality and the quality's details on the hidden instance."""
    runs = [
        (tier, family, name, plan)
        for tier in TIERS
        for family in CURATED
        for name, plan in attacks(at_tier(family.package, tier)).items()
    ]

    async def score(tier: HintTier, family: Family, plan: WorkflowPlan) -> dict[str, Any]:
        return _score(await scored_run(plan, _hidden(family, tier)))

    scores = asyncio.run(gather([score(tier, family, plan) for tier, family, _, plan in runs]))
    return {(tier, family.task_id, name): found for (tier, family, name, _), found in zip(runs, scores)}


@pytest.fixture(scope="module")
def curated_bars() -> dict[str, float]:
    return _bars(CURATED)


Scores = dict[tuple[HintTier, str, str], dict[str, Any]]


def _at(scores: Scores, tier: HintTier) -> dict[tuple[str, str], dict[str, Any]]:
    """The scores at ``tier``, by (family, attack)."""
    found = {(task_id, name): score for (at, task_id, name), score in scores.items() if at == tier}
    assert len({task_id for task_id, _ in found}) == len(CURATED) == 40
    return found


TYPES = {f.task_id: f.task_type for f in CURATED}


@pytest.mark.parametrize("tier", TIERS)
def test_no_attack_earns_anything_at_any_tier(attack_scores, curated_bars, tier: HintTier) -> None:
    """Every attack, with the examples every tier carries, scores 0 on the hidden instance
    (and so stays under the bar and short of a right answer)."""
    scored = _at(attack_scores, tier)
    assert {name for _, name in scored} == {
        "precompute",
        "lookup",
        "forged summary",
        *(f"memorise:{i}" for i in range(3)),
    }
    assert {key: found["S"] for key, found in scored.items() if found["S"] > 0} == {}
    assert all(curated_bars[task_id] > 0 for task_id, _ in scored)


@pytest.mark.parametrize("tier", TIERS)
def test_data_rag_and_agent_attacks_and_forged_code_earn_nothing(attack_scores, tier: HintTier) -> None:
    """S 0, and for agent no checklist item passed: its numbers are found as whole tokens
    only (a substring keyword once credited the hidden ``3`` inside an example's ``134``)."""
    scored = _at(attack_scores, tier)
    nothing = {key: found for key, found in scored.items() if TYPES[key[0]] != "code" or key[1] == "forged summary"}
    assert {key: found["S"] for key, found in nothing.items() if found["S"] > 0} == {}
    forged = [found["details"]["quality"] for key, found in nothing.items() if key[1] == "forged summary"]
    assert len(forged) == 10 and all(quality.get("passed", 0) == 0 for quality in forged)
    agent = [found["details"]["quality"] for key, found in nothing.items() if TYPES[key[0]] == "agent"]
    assert agent and all(quality["passed"] == 0 for quality in agent), agent


@pytest.mark.parametrize("tier", TIERS)
def test_a_code_attack_passes_only_the_calls_any_instance_answers_alike(attack_scores, tier: HintTier) -> None:
    """A lookup module is right on a hidden call only where a public example shows the
    same call with the same answer (``count_above([])`` is 0 whatever the threshold), or
    where its fallback is the answer (``rotate([57])`` is ``[57]``)."""
    for (task_id, name), found in _at(attack_scores, tier).items():
        if TYPES[task_id] == "code":
            family = next(f for f in CURATED if f.task_id == task_id)
            assert found["details"]["quality"].get("passed", 0) <= _alike(family), (task_id, name, found)


def _alike(family: Family) -> int:
    """The hidden instance's calls a module that never reads its constants can get right:
    shown with the same answer in a public example, or answered by the first argument or None."""
    _, shown = _cases(family.package)
    seen = {json.dumps([case["args"], case["expected"]]) for case in shown}
    hidden = family.instance(HIDDEN).reference["cases"]
    return sum(
        json.dumps([case["args"], case["expected"]]) in seen
        or case["expected"] is None
        or case["expected"] == (case["args"][0] if case["args"] else None)
        for case in hidden
    )


class TableMiner:
    """A miner that keeps ``good``'s plan for each curated family (planned from its full
    package) and answers any package with the plan of the curated family of the same type
    whose description is closest (difflib ratio): the plan as it is, its subnets remapped
    to the package's allowed subnets of the same type (the ``i``-th of a type to the
    ``i``-th, wrapping; a subnet of a type the package lacks stays, and the plan is
    invalid), its ``${input.*}`` refs kept. A package it knows gets its plan back."""

    name = "table"

    def __init__(self, families: tuple[Family, ...]) -> None:
        good = load_planner("good")
        self.stored = [(f.package, good.plan(f.package).plan) for f in families]

    def plan(self, package: TaskPackage) -> PlanProposal:
        same_type = [(known, plan) for known, plan in self.stored if known.task_type == package.task_type]
        if not same_type:
            raise PlanningError(f"no curated {package.task_type} family in the table")
        known, plan = max(same_type, key=lambda row: _closeness(row[0].description, package.description))
        to = _remap(known, package)
        nodes = [node.model_copy(update={"subnet": to.get(node.subnet, node.subnet)}) for node in plan.nodes]
        remapped = plan.model_copy(update={"nodes": nodes})
        cost, latency = estimate(remapped)
        return PlanProposal(remapped, cost, latency, 1.0, f"the stored plan of {known.task_id}")


def _closeness(a: str, b: str) -> float:
    return SequenceMatcher(None, a, b).ratio()


def _by_type(package: TaskPackage) -> dict[str, list[str]]:
    """The package's allowed subnets, grouped by type, in the order listed."""
    allowed = package.constraints.allowed_subnets or list(package.available_tools)
    grouped: dict[str, list[str]] = {}
    for subnet in allowed:
        grouped.setdefault(package.available_tools[subnet].type, []).append(subnet)
    return grouped


def _remap(known: TaskPackage, package: TaskPackage) -> dict[str, str]:
    """Each of ``known``'s subnets -> the subnet of the same type and rank in ``package``."""
    ours, theirs = _by_type(known), _by_type(package)
    mapping = {}
    for kind, subnets in ours.items():
        if kind in theirs:
            mapping.update({subnet: theirs[kind][i % len(theirs[kind])] for i, subnet in enumerate(subnets)})
    return mapping


@pytest.fixture(scope="module")
def table() -> TableMiner:
    return TableMiner(CURATED)


def test_the_table_miner_answers_a_curated_package_with_its_stored_plan_at_every_tier(table) -> None:
    assert len(table.stored) == 40
    for package, plan in table.stored:
        assert all(table.plan(at_tier(package, tier)).plan == plan for tier in TIERS), package.task_id


def test_the_table_miner_scores_no_more_than_naive_on_forty_drawn_families(table) -> None:
    drawn = _drawn()
    assert len(drawn) == 40
    runs = [(family, tier, table.plan(at_tier(family.package, tier))) for family in drawn for tier in TIERS]

    async def score(family: Family, tier: HintTier, proposal: PlanProposal) -> float:
        return (await scored_run(proposal.plan, _hidden(family, tier), proposal.total_estimated_cost))["score"]["S"]

    scores = asyncio.run(gather([score(*run) for run in runs]))
    bars = _bars(drawn)
    worse = {
        (family.task_id, tier, proposal.reasoning): (s, bars[family.task_id])
        for (family, tier, proposal), s in zip(runs, scores)
        if s > bars[family.task_id]
    }
    assert worse == {}


SCREENED = range(10_000, 10_200)
"""Hidden instance seeds screened for the instance kindest to a lookup module."""


def _guessed_right(table: dict[str, Any], instance: Instance, fallback: str) -> int:
    """How many of ``instance``'s calls the lookup module over ``table`` with ``fallback`` answers right."""
    _, guess = FALLBACKS[fallback]
    right = 0
    for case in instance.reference["cases"]:
        key = json.dumps(case["args"])
        try:
            got = table[key] if key in table else guess(*case["args"])
        except TypeError:  # len of a number: the module raises, the call fails
            continue
        right += json.dumps(got) == json.dumps(case["expected"])
    return right


def _luckiest(family: Family) -> tuple[str, int, int]:
    """(fallback, seed, calls right): the screened hidden instance and fallback on which the
    lookup module is right most often."""
    table, instances = _table(family.package), [family.instance(seed) for seed in SCREENED]
    return max(
        (
            (fallback, instance.seed, _guessed_right(table, instance, fallback))
            for fallback in FALLBACKS
            for instance in instances
        ),
        key=lambda found: found[2],
    )


def test_a_lookup_module_with_a_constant_free_guess_stays_under_the_gate_and_naive() -> None:
    """The lookup module of (c) with each constant-free fallback, on every curated code
    family and the ten drawn ones, over 200 hidden instances each: right on half the calls
    at most (a constant-free guess on one, a public example's call on the others: fizzbuzz
    of a small n, before its Buzz, with an example's Fizz), and on the instance where it is
    right most often, scored at every tier, short of the efficiency gate and under the bar.

    Before the cases were drawn so (tasks/code_families.py: no call of an instance is one
    a constant-free guess answers), a guess was right on five or six calls of 0.3 % to 9 %
    of instances, opened the gate and beat naive at every tier: code_rotate's identity 0.897 against 0.819 (a
    list whose length divides r comes back unchanged), code_count_above's len 0.970 against
    0.818 (a small limit), and 0.89-0.90 against 0.83-0.86 on three drawn families."""
    families = [family for family in (*CURATED, *_drawn()) if family.task_type == "code"]
    assert len(families) == 20
    screened = [(family, *_luckiest(family)) for family in families]
    assert {family.task_id: right for family, _, _, right in screened if right > 3} == {}
    luckiest = [found for found in screened if found[3] > 0]  # right on no call: quality 0, S 0
    runs = [(family, fallback, seed, tier) for family, fallback, seed, _ in luckiest for tier in TIERS]

    async def score(family: Family, fallback: str, seed: int, tier: HintTier) -> dict[str, Any]:
        package = at_tier(family.package, tier)
        plan = answer_plan(package, _lookup(package, fallback))
        return (await scored_run(plan, _hidden(family, tier, seed)))["score"]

    async def everything() -> tuple[list[dict[str, Any]], list[float]]:
        return (
            await gather([score(*run) for run in runs]),
            await gather([_bar(family, seed) for family, _, seed, _ in luckiest]),
        )

    scores, bar_list = asyncio.run(everything())
    bars = {family.task_id: bar for (family, *_), bar in zip(luckiest, bar_list)}
    worse = {
        (family.task_id, fallback, seed, tier): (score["S"], bars[family.task_id])
        for (family, fallback, seed, tier), score in zip(runs, scores)
        if score["S"] > bars[family.task_id] or score["details"]["gate_open"]
    }
    assert worse == {}
