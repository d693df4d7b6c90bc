"""The benchmark task set ``benchmarks/v1.json``: well formed, plannable, and fair.

The last test is the measuring loop: a handful of tasks are planned by both
reference strategies, executed through the real executor and local tools, and
scored; the good plan must complete and score at least as well as the naive one.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import jsonschema
import pytest

from miner.planner import get_planner
from miner.tools.registry import default_registry
from miner.tools.runner import LocalRunner
from protocol.dataref import find_refs
from protocol.task import Task, TaskSet
from protocol.validation import check_plan
from scoring.evaluate import score_run
from validator.executor import budget_ceiling, execute

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
RAW = json.loads((BENCHMARKS / "v1.json").read_text())
TASKS = TaskSet.model_validate(RAW).tasks
SCORED = [task for task in TASKS if not task.requires_model]
TYPES = ("code", "rag", "agent", "data_transform")

# One task per type, covering the ways a naive plan loses: a pricey subnet listed
# first (rag, agent, code), a flaky one listed first (flight delays), and
# independent branches it runs one after another (order ledger).
MEASURED = (
    "dt_order_ledger",
    "dt_flight_delays",
    "rag_dag_concepts",
    "agent_olympic_gaps",
    "code_vowels_reverse",
)


def test_v1_validates_against_the_json_schema_and_the_pydantic_model():
    schema = json.loads((BENCHMARKS / "task.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(RAW)]
    assert errors == []
    assert TaskSet.model_validate_json((BENCHMARKS / "v1.json").read_text()).version == "v1"


def test_the_schema_rejects_a_task_missing_its_typed_reference():
    schema = json.loads((BENCHMARKS / "task.schema.json").read_text())
    broken = json.loads(json.dumps(RAW["tasks"][0]))
    broken["task_type"] = "rag"  # a data_transform reference has no reference_answer
    with pytest.raises(jsonschema.ValidationError, match="reference_answer"):
        jsonschema.validate({"version": "v1", "tasks": [broken]}, schema)


def test_set_size_type_mix_and_unique_ids():
    assert len(SCORED) >= 40
    counts = Counter(task.task_type for task in SCORED)
    assert all(counts[kind] >= 8 for kind in TYPES), counts
    ids = [task.task_id for task in TASKS]
    assert len(ids) == len(set(ids))


def test_every_step_runs_on_a_registered_tool_and_an_allowed_subnet_of_its_kind():
    actions = set(default_registry().names())
    for task in TASKS:
        allowed = task.constraints.allowed_subnets
        assert allowed and set(allowed) <= set(task.available_tools), task.task_id
        kinds = {task.available_tools[name].type for name in allowed}
        for step in task.steps:
            assert step.action in actions, (task.task_id, step.id)
            assert step.kind in kinds, (task.task_id, step.id)


def test_steps_are_listed_in_dependency_order():
    """Every DataRef names an earlier step, so the listed order is a valid chain."""
    for task in TASKS:
        seen: set[str] = set()
        for step in task.steps:
            assert {ref.node_id for ref in find_refs(step.params)} <= seen, (task.task_id, step.id)
            seen.add(step.id)
        assert task.steps[-1].id in seen


def test_references_have_what_their_scorer_reads():
    for task in SCORED:
        ref = task.reference
        if task.task_type == "code":
            assert ref["entry_point"].isidentifier() and ref["cases"]
        elif task.task_type == "rag":
            assert ref["reference_answer"].strip()
        elif task.task_type == "agent":
            assert ref["goal_checklist"]
        else:
            jsonschema.validate(ref["expected_output"], ref["output_schema"])


def test_every_task_is_fair_to_a_plain_plan_and_leaves_choices_to_make():
    """Several subnets of some kind; the naive chain fits the latency limit and the
    budget by its own estimates, and the good plan fits the budget with its retries."""
    good, naive = get_planner("good"), get_planner("naive")
    for task in SCORED:
        package = task.package()
        by_kind = Counter(info.type for info in package.available_tools.values())
        assert max(by_kind.values()) >= 2, task.task_id
        plain = naive.plan(package)
        assert plain.total_estimated_latency < package.constraints.max_latency_seconds, task.task_id
        assert plain.total_estimated_cost < package.constraints.max_budget_tao, task.task_id
        assert good.plan(package).total_estimated_cost <= package.constraints.max_budget_tao, task.task_id


async def _score(task: Task, strategy: str, registry) -> tuple[float, str]:
    package = task.package()
    proposal = get_planner(strategy).plan(package)
    check = check_plan(proposal.plan, allowed_subnets=package.constraints.allowed_subnets)
    execution = await execute(
        proposal.plan,
        LocalRunner(registry, subnets=package.available_tools),
        task_id=task.task_id,
        budget_ceiling=budget_ceiling(package.constraints.max_budget_tao, proposal.total_estimated_cost),
        deadline_s=2 * package.constraints.max_latency_seconds,
        check=check,
    )
    score = score_run(task, metrics=execution.metrics, final_output=execution.final_output, valid=check.runnable)
    return score.S, execution.status


@pytest.mark.parametrize("task_id", MEASURED)
async def test_good_plan_completes_and_scores_at_least_the_naive_one(task_id):
    task = next(task for task in TASKS if task.task_id == task_id)
    registry = default_registry()
    good, status = await _score(task, "good", registry)
    naive, _ = await _score(task, "naive", registry)
    assert status == "completed"
    assert good >= naive, (good, naive)
