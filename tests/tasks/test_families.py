"""The v2 task families: well formed, reproducible from a seed, plannable, and hidden."""

from __future__ import annotations

import json
from collections import Counter

import jsonschema
import pytest

from planners import load_planner
from protocol.dataref import find_refs
from protocol.task import synthetic_variant
from protocol.validation import check_plan_for
from subnets.base import ToolContext
from subnets.registry import default_registry
from tasks import FamilyTasks, family, load_families
from tasks.seed import Draw

FAMILIES = load_families()
IDS = [f.task_id for f in FAMILIES]


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def test_forty_families_ten_of_each_type_with_unique_ids() -> None:
    assert len(set(IDS)) == len(IDS) >= 40
    assert Counter(f.task_type for f in FAMILIES) == {"data_transform": 10, "rag": 10, "agent": 10, "code": 10}


@pytest.mark.parametrize("fam", FAMILIES, ids=IDS)
def test_instances_match_the_schema_and_the_example_is_the_public_instance(fam) -> None:
    package = fam.package
    jsonschema.Draft202012Validator.check_schema(package.inputs)
    assert package.example == fam.example().inputs
    for seed in (0, 1, 2**63 - 1):
        jsonschema.validate(fam.instance(seed).inputs, package.inputs)


@pytest.mark.parametrize("fam", FAMILIES, ids=IDS)
def test_one_seed_one_instance_bit_for_bit_and_other_seeds_differ(fam) -> None:
    first, again = fam.instance(12345), fam.instance(12345)
    assert _canonical([first.inputs, first.reference]) == _canonical([again.inputs, again.reference])
    others = {_canonical([i.inputs, i.reference]) for i in map(fam.instance, range(1, 6))}
    assert len(others) == 5 and _canonical([first.inputs, first.reference]) not in others


@pytest.mark.parametrize("fam", FAMILIES, ids=IDS)
def test_steps_read_the_inputs_and_both_planners_plan_valid_plans(fam) -> None:
    assert any(ref.is_input for step in fam.package.steps for ref in find_refs(step.params))
    for strategy in ("good", "naive"):
        proposal = load_planner(strategy).plan(fam.package)
        check = check_plan_for(proposal.plan, fam.package)
        assert check.valid, (strategy, check.errors, check.node_errors)


def test_the_package_a_miner_sees_holds_no_instance_and_no_reference() -> None:
    fam = family("rag_towns")
    task = fam.task(fam.instance(99))
    sent = task.package().model_dump()
    assert {"reference", "instance_inputs", "seed"}.isdisjoint(sent)
    assert _canonical(sent["example"]) != _canonical(task.instance_inputs)


def test_the_validators_task_source_draws_instances_by_seed() -> None:
    source = FamilyTasks()
    tasks = source.tasks()
    assert [t.task_id for t in tasks] == IDS
    drawn = source.instance(tasks[0], 7)
    assert drawn.seed == 7 and drawn.instance_inputs == FAMILIES[0].instance(7).inputs
    assert drawn.reference == FAMILIES[0].instance(7).reference


def test_synthetic_variant_is_opaque_tighter_and_draws_fresh_instances() -> None:
    fam = family("dt_sales")
    variant = fam.synthetic(42)
    assert variant.task_id.startswith("syn_") and len(variant.task_id) == 12
    assert variant.package.constraints.max_budget_tao < fam.package.constraints.max_budget_tao
    assert variant.package.constraints.max_latency_seconds < fam.package.constraints.max_latency_seconds
    assert variant.instance(3).inputs == fam.instance(3).inputs
    # the same rule as the validator's draw: variant of the instance == instance of the variant
    assert variant.task(variant.instance(42)) == synthetic_variant(fam.task(fam.instance(42)), 42)


def test_draws_are_pinned_so_every_validator_makes_the_same_instances() -> None:
    # sha256 in counter mode: a change here changes every validator's instances.
    draw = Draw(2026)
    assert [draw.below(1000) for _ in range(3)] == [530, 189, 313]
    assert Draw(2026).shuffled(range(6)) == [3, 0, 2, 1, 5, 4]
    # a long shuffle (a table's row ids), then the draws after it go on from its counter
    draw = Draw(2026)
    assert draw.sample(range(100, 1000), 4) == [766, 951, 814, 430] and draw.below(1000) == 872
    assert draw.shuffled("abcde") == ["c", "e", "d", "a", "b"] and draw.below(7) == 1
    assert Draw(-1).below(2**64 - 1) == 6973430666385906767  # a seed reduced mod 2**64
    found = family("dt_sales").instance(1)
    assert found.inputs["table"] == "t-c32e780a"
    assert found.holdings["t-c32e780a"].startswith("order,region,units\nS986,east,15\nS537,north,38\n")


async def test_search_runs_over_the_documents_the_instance_holds() -> None:
    fam = family("rag_towns")
    instance = fam.instance(5)
    subject = instance.inputs["subjects"][0]
    ctx = ToolContext("t", "n", 1, 5.0)
    documents = instance.holdings[instance.inputs["collection"]]
    result = await default_registry().call(
        "search", {"query": f"{subject} population residents", "documents": documents, "k": 1}, ctx
    )
    assert result.output.text in instance.reference["reference_answer"]


@pytest.mark.parametrize("fam", FAMILIES, ids=IDS)
def test_every_family_needs_two_subnet_types_and_names_its_held_data_by_id(fam) -> None:
    kinds = {info.type for info in fam.package.available_tools.values()}
    assert len(kinds) >= 2
    for seed in (0, 9):
        instance = fam.instance(seed)
        named = {value for key, value in instance.inputs.items() if key in ("collection", "table")}
        assert named == set(instance.holdings)
        assert not any(str(held)[:40] in json.dumps(instance.inputs) for held in instance.holdings.values())
    readers = {"search": "collection", "csv_to_json": "table"}
    for hint in fam.package.steps:
        if hint.action in readers:
            assert set(hint.params) & {"documents", "csv"} == set() and readers[hint.action] in hint.params
    for example in fam.package.examples:
        assert set(example.holdings) == {v for k, v in example.inputs.items() if k in ("collection", "table")}


@pytest.mark.parametrize("fam", [f for f in FAMILIES if f.task_type == "code"], ids=lambda f: f.task_id)
def test_a_code_description_carries_the_body_and_says_how_constants_are_named(fam) -> None:
    body = fam.package.steps[1].params["text"]
    assert f"```python\n{body}```" in fam.package.description and "UPPER_CASE" in fam.package.description
    row = fam.example().holdings[fam.example().inputs["table"]].splitlines()[1]
    assert row not in fam.package.description
