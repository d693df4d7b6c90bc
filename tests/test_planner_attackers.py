"""The attacker strategies a local network runs: what they answer and how they score."""

from __future__ import annotations

from pathlib import Path

from miner.planner import get_planner
from neurons.localrun import run_document
from protocol.documents import load_plan_document
from protocol.task import Task, TaskSet

TASKS = Path(__file__).resolve().parent.parent / "benchmarks" / "v1.json"


def _task(task_id: str) -> Task:
    return next(t for t in TaskSet.model_validate_json(TASKS.read_bytes()).tasks if t.task_id == task_id)


async def _score(strategy: str, task: Task) -> dict:
    answer = get_planner(strategy).plan(task.package()).answer(task.package(), miner_uid=1)
    document = load_plan_document(answer.model_dump(mode="json", by_alias=True, exclude_none=True))
    return await run_document(document, task=task)


async def test_invalid_plans_are_rejected_before_anything_runs() -> None:
    report = await _score("invalid", _task("rag_water_facts"))
    assert report["status"] == "invalid" and report["score"]["S"] == 0
    assert any("cycle" in error for error in report["errors"])


async def test_a_stored_answer_wins_only_while_the_task_never_changes() -> None:
    task = _task("rag_water_facts")
    unchanged = await _score("precompute", task)
    assert unchanged["status"] == "completed" and unchanged["score"]["output_quality"] > 0.9
    # Another instance of the same family: same package, another reference.
    instance = task.model_copy(update={"reference": {"reference_answer": "Water boils at 72 degrees on Everest."}})
    changed = await _score("precompute", instance)
    assert changed["score"]["output_quality"] < unchanged["score"]["output_quality"] - 0.5
