"""Wire-model rules a miner relies on: node ids, output size limits, required shapes."""

import pytest
from pydantic import ValidationError

from protocol.limits import OUTPUT_CODE_MAX_BYTES, OUTPUT_METADATA_MAX_BYTES, OUTPUT_TEXT_MAX_BYTES
from protocol.output import NodeOutput
from protocol.plan import WorkflowPlan
from protocol.synapse import TaskPackage
from protocol.task import Task


def test_output_at_each_limit_is_accepted():
    out = NodeOutput.model_validate(
        {"text": "a" * OUTPUT_TEXT_MAX_BYTES, "artifacts": {"code": "c" * OUTPUT_CODE_MAX_BYTES}}
    )
    assert len(out.text) == OUTPUT_TEXT_MAX_BYTES


@pytest.mark.parametrize(
    "doc, field",
    [
        ({"text": "a" * (OUTPUT_TEXT_MAX_BYTES + 1)}, "text"),
        ({"text": "é" * (OUTPUT_TEXT_MAX_BYTES // 2 + 1)}, "text"),  # limit is UTF-8 bytes, not chars
        ({"artifacts": {"code": "c" * (OUTPUT_CODE_MAX_BYTES + 1)}}, "artifacts.code"),
        ({"artifacts": {"metadata": {"k": "m" * OUTPUT_METADATA_MAX_BYTES}}}, "artifacts.metadata"),
        ({"text": 3}, "text"),
        ({"text": "x", "extra": 1}, "extra"),
    ],
)
def test_oversize_or_malformed_output_is_rejected_not_truncated(doc, field):
    with pytest.raises(ValidationError) as info:
        NodeOutput.model_validate(doc)
    assert field in str(info.value)


def test_plan_accepts_the_spec_example_and_round_trips_from_alias():
    plan = WorkflowPlan.model_validate(
        {
            "nodes": [
                {
                    "id": "step_1",
                    "subnet": "sn1",
                    "action": "generate",
                    "params": {"p": 1},
                    "estimated_cost": 0.001,
                    "estimated_latency": 0.5,
                    "touches": ["res-a"],
                    "parallel_safe": True,
                },
                {"id": "step_2", "subnet": "sn1", "action": "generate"},
            ],
            "edges": [{"from": "step_1", "to": "step_2"}],
            "error_handling": {"step_1": {"retry_count": 2, "timeout_seconds": 3.0}},
            "output_node": "step_2",
            "max_parallel": 8,
        }
    )
    assert plan.edges[0].source == "step_1"
    assert plan.to_wire()["edges"] == [{"from": "step_1", "to": "step_2"}]
    assert plan.policy("step_1").retry_count == 2
    assert plan.policy("step_2").retry_count == 0


@pytest.mark.parametrize("node_id", ["", "a b", "x" * 65, "a.b", "${x}"])
def test_node_ids_outside_the_grammar_are_rejected(node_id):
    with pytest.raises(ValidationError):
        WorkflowPlan.model_validate({"nodes": [{"id": node_id, "subnet": "sn1", "action": "a"}]})


def test_negative_or_infinite_estimates_are_rejected():
    for bad in (-1, float("inf"), float("nan")):
        with pytest.raises(ValidationError):
            WorkflowPlan.model_validate({"nodes": [{"id": "a", "subnet": "s", "action": "a", "estimated_cost": bad}]})


def test_task_package_hides_the_reference_from_miners():
    task = Task(task_id="t1", task_type="rag", reference={"reference_answer": "secret"})
    package = task.package()
    assert isinstance(package, TaskPackage)
    assert "reference" not in package.model_dump()
    assert "secret" not in package.model_dump_json()
