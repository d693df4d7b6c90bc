"""The shipped v2 task set as a whole: well formed, plannable, fair, and answerable.

`tests/tasks/test_families.py` checks each family's schema, example and determinism by seed;
`tests/project/test_architecture.py` keeps the generators independent of the tools (the
``tasks`` package imports only ``protocol``). Here: drawn instances written as a
task-set file match ``tasks/task.schema.json``; every step can run where the
package lets it; references hold what their scorer reads; the limits are fair to a plain
plan. The last test is the measuring loop: a few cheap families, one hidden instance
each, planned by both reference strategies and run through the one path a validator
uses; the good plan must complete with a perfect answer (the generator's reference,
computed without the tools, agrees with what the tools compute) and score at least as
well as the naive one.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import jsonschema
import pytest

from neurons.localrun import family_task, run_document
from planners import load_planner
from protocol.dataref import find_refs
from protocol.documents import load_plan_document
from protocol.task import Task, TaskSet
from subnets.registry import default_registry
from tasks import VERSION, load_families

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "tasks" / "task.schema.json").read_text())
FAMILIES = load_families()
PACKAGES = [found.package for found in FAMILIES]
SEEDS = (1, 77, 2**40 + 3)
"""Hidden instances (not the public example, seed 0) the static checks draw."""
INSTANCES = [found.task(found.instance(seed)) for found in FAMILIES for seed in SEEDS]

# Two families per type, cheap to run: one whose first-listed subnet is flaky (naive,
# without retries, fails there), one where naive loses latency or cost by chaining.
MEASURED = (
    "dt_staff",
    "dt_orders",
    "rag_libraries",
    "rag_bridges",
    "agent_recipe",
    "agent_difference_towns",
    "code_fizzbuzz",
    "code_tax",
)
HIDDEN = 90210


def _taskset_document(tasks: list[Task]) -> dict:
    return json.loads(TaskSet(version=VERSION, tasks=tasks).model_dump_json())


def test_drawn_instances_as_a_task_set_file_match_the_json_schema_and_the_pydantic_model():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    document = _taskset_document(INSTANCES)
    assert [e.message for e in jsonschema.Draft202012Validator(SCHEMA).iter_errors(document)] == []
    assert TaskSet.model_validate(document).tasks == INSTANCES


def test_the_schema_rejects_a_task_missing_its_typed_reference():
    data_task = next(task for task in INSTANCES if task.task_type == "data_transform")
    broken = _taskset_document([data_task])
    broken["tasks"][0]["task_type"] = "rag"  # a data_transform reference has no reference_answer
    with pytest.raises(jsonschema.ValidationError, match="reference_answer"):
        jsonschema.validate(broken, SCHEMA)


def test_every_step_runs_on_a_registered_tool_and_an_allowed_subnet_of_its_kind():
    actions = set(default_registry().names())
    for package in PACKAGES:
        allowed = package.constraints.allowed_subnets
        assert allowed and set(allowed) <= set(package.available_tools), package.task_id
        kinds = {package.available_tools[name].type for name in allowed}
        for step in package.steps:
            assert step.action in actions, (package.task_id, step.id)
            assert step.kind in kinds, (package.task_id, step.id)


def test_steps_are_listed_in_dependency_order():
    """Every DataRef to a step names an earlier one, so the listed order is a valid chain."""
    for package in PACKAGES:
        seen: set[str] = set()
        for step in package.steps:
            sources = {ref.node_id for ref in find_refs(step.params) if not ref.is_input}
            assert sources <= seen, (package.task_id, step.id)
            seen.add(step.id)


def test_every_drawn_reference_has_what_its_scorer_reads():
    for task in INSTANCES:
        ref = task.reference
        if task.task_type == "code":
            assert ref["entry_point"].isidentifier() and ref["cases"], task.task_id
        elif task.task_type == "rag":
            assert ref["reference_answer"].strip() and ref["key_facts"], task.task_id
            assert all(fact in ref["reference_answer"] for fact in ref["key_facts"]), task.task_id
        elif task.task_type == "agent":
            assert ref["goal_checklist"], task.task_id
        else:
            assert isinstance(ref["expected_output"], dict) and ref["expected_output"], task.task_id
            if "output_schema" in ref:
                jsonschema.validate(ref["expected_output"], ref["output_schema"])


@pytest.mark.e2e
def test_every_family_is_fair_to_a_plain_plan_and_leaves_choices_to_make():
    """Several subnets of some kind; the naive chain fits the latency limit and the
    budget by its own estimates, and the good plan fits the budget with its retries."""
    good, naive = load_planner("good"), load_planner("naive")
    for package in PACKAGES:
        by_kind = Counter(info.type for info in package.available_tools.values())
        assert max(by_kind.values()) >= 2, package.task_id
        plain = naive.plan(package)
        assert plain.total_estimated_latency < package.constraints.max_latency_seconds, package.task_id
        assert plain.total_estimated_cost < package.constraints.max_budget_tao, package.task_id
        assert good.plan(package).total_estimated_cost <= package.constraints.max_budget_tao, package.task_id


async def _run(task: Task, strategy: str) -> dict:
    package = task.package()
    answer = load_planner(strategy).plan(package).answer(package, miner_uid=1)
    document = load_plan_document(answer.model_dump(mode="json", by_alias=True, exclude_none=True))
    return await run_document(document, task=task)


def test_the_measured_families_cover_every_type():
    assert {family_task(task_id, HIDDEN).task_type for task_id in MEASURED} == {
        "code",
        "rag",
        "agent",
        "data_transform",
    }


@pytest.mark.e2e
@pytest.mark.parametrize("task_id", MEASURED)
async def test_good_plan_completes_with_the_reference_answer_and_scores_at_least_the_naive_one(task_id):
    task = family_task(task_id, HIDDEN)
    good, naive = await _run(task, "good"), await _run(task, "naive")
    assert good["status"] == "completed", good["nodes"]
    assert good["score"]["output_quality"] == 1.0, good["score"]
    assert good["score"]["S"] >= naive["score"]["S"], (good["score"], naive["score"])


@pytest.mark.parametrize(
    "doc, shape",
    [
        ({"tasks": []}, "taskset"),
        ({"tasks": [], "nodes": []}, "taskset"),
        ({"nodes": []}, "plan"),
        ({"workflow_plan": {}, "task_id": "t"}, "plan"),
        ({"dag": []}, "plan"),
        ({"task_id": "t"}, "task"),
        ({"version": "v2"}, None),
        ([1], None),
    ],
)
def test_a_document_is_told_apart_by_its_keys(doc, shape) -> None:
    from protocol.documents import document_shape

    assert document_shape(doc) == shape
