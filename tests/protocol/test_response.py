"""Validator-side checks of a miner's WorkflowSynapse answer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.limits import Limits
from protocol.response import check_response
from protocol.synapse import MINER_FIELDS, Constraints, TaskPackage
from support.scale import examples

REQUEST = TaskPackage(
    task_id="task-1",
    task_type="rag",
    constraints=Constraints(allowed_subnets=["sn1", "sn2"]),
)

PLAN = {
    "nodes": [
        {"id": "a", "subnet": "sn1", "action": "search", "params": {"query": "x"}},
        {"id": "b", "subnet": "sn2", "action": "llm", "params": {"prompt": "${a.output.text}"}},
    ],
    "edges": [{"from": "a", "to": "b"}],
}


def answer(**changes: Any) -> dict:
    doc = REQUEST.model_dump() | {
        "miner_uid": 3,
        "workflow_plan": PLAN,
        "total_estimated_cost": 0.01,
        "total_estimated_latency": 2.0,
        "confidence": 0.8,
        "reasoning": "retrieve then generate",
    }
    doc.update(changes)
    return {k: v for k, v in doc.items() if v is not _DROP}


_DROP = object()


def check(doc: Any, **kwargs: Any):
    return check_response(json.dumps(doc).encode(), REQUEST, **kwargs)


def test_valid_answer() -> None:
    result = check(answer())
    assert result.ok and result.reason is None
    assert result.synapse is not None and result.synapse.miner_uid == 3
    assert result.plan_check is not None and result.plan_check.valid
    assert result.plan_check.tiers == [["a"], ["b"]]


def test_node_errors_do_not_invalidate_the_response() -> None:
    plan = {**PLAN, "nodes": [PLAN["nodes"][0], {**PLAN["nodes"][1], "params": {"q": "${zz.output.text}"}}]}
    result = check(answer(workflow_plan=plan))
    assert result.ok
    assert result.plan_check is not None
    assert result.plan_check.node_errors == {"b": "dataref_not_upstream:zz"}


def test_body_over_limit() -> None:
    raw = json.dumps(answer()).encode()
    result = check_response(raw, REQUEST, limits=Limits(max_response_bytes=len(raw) - 1))
    assert not result.ok
    assert result.reason == f"response too large: {len(raw)} bytes > {len(raw) - 1}"
    assert check_response(raw, REQUEST, limits=Limits(max_response_bytes=len(raw))).ok


@pytest.mark.parametrize("raw", [b"", b"{", b"\xff\xfe\x00", b'{"a": NaN}', b"[" * 50_000])
def test_not_json(raw: bytes) -> None:
    result = check_response(raw, REQUEST)
    assert not result.ok and result.reason is not None
    assert result.reason.startswith("response is not JSON")


def test_not_an_object() -> None:
    assert check([answer()]).reason == "response is not a JSON object: got list"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"confidence": 1.5}, "confidence: Input should be less than or equal to 1"),
        ({"miner_uid": "me"}, "miner_uid: Input should be a valid integer"),
        ({"workflow_plan": {"nodes": [{"id": "a/b", "subnet": "s", "action": "x"}]}}, "workflow_plan.nodes.0.id"),
        ({"task_id": _DROP}, "task_id: Field required"),
    ],
)
def test_schema_violation_names_the_field(changes: dict, field: str) -> None:
    result = check(answer(**changes))
    assert not result.ok and result.reason is not None
    assert result.reason.startswith("schema violation: ")
    assert field in result.reason


@pytest.mark.parametrize("name", [*MINER_FIELDS, "scoring_version"])
def test_missing_miner_field(name: str) -> None:
    # None is "missing" for the optional model fields; scoring_version must be an int.
    for value in (_DROP,) if name == "scoring_version" else (_DROP, None):
        result = check(answer(**{name: value}))
        assert not result.ok
        assert result.reason == f"missing miner fields: {name}"


def test_several_missing_fields_listed() -> None:
    assert check(answer(confidence=None, reasoning=_DROP)).reason == "missing miner fields: confidence, reasoning"


def test_scoring_version_mismatch() -> None:
    result = check(answer(scoring_version=REQUEST.scoring_version + 1))
    assert (
        result.reason
        == f"scoring_version mismatch: got {REQUEST.scoring_version + 1}, expected {REQUEST.scoring_version}"
    )
    assert result.synapse is not None


def test_task_id_mismatch() -> None:
    assert check(answer(task_id="other")).reason == "task_id mismatch: got 'other', expected 'task-1'"


def test_invalid_plan() -> None:
    plan = {**PLAN, "edges": [{"from": "a", "to": "b"}, {"from": "b", "to": "a"}]}
    result = check(answer(workflow_plan=plan))
    assert not result.ok
    assert result.reason == "invalid plan: graph has no roots — cycle or malformed deps; cycle: a -> b -> a"
    assert result.plan_check is not None and not result.plan_check.runnable


def test_disallowed_subnet() -> None:
    plan = {**PLAN, "nodes": [PLAN["nodes"][0], {**PLAN["nodes"][1], "subnet": "sn9"}]}
    result = check(answer(workflow_plan=plan))
    assert result.reason == "invalid plan: node b: disallowed subnet sn9"


def test_plan_over_node_limit() -> None:
    result = check_response(json.dumps(answer()).encode(), REQUEST, limits=Limits(max_nodes=1))
    assert result.reason == "invalid plan: too many nodes: 2 > 1"


def test_deeply_nested_params_are_an_invalid_plan() -> None:
    deep: Any = "leaf"
    for _ in range(200):
        deep = {"n": deep}
    plan = {"nodes": [{"id": "a", "subnet": "sn1", "action": "echo", "params": deep}]}
    result = check(answer(workflow_plan=plan))
    assert result.reason == "invalid plan: node a: params nested deeper than 16 levels"


@settings(max_examples=examples(300), deadline=None)
@given(raw=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode)))
def test_never_raises_on_arbitrary_bytes(raw: bytes) -> None:
    result = check_response(raw, REQUEST)
    assert not result.ok and result.reason


_json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=examples(200), deadline=None)
@given(field=st.sampled_from([*MINER_FIELDS, "task_id", "scoring_version", "constraints"]), value=_json_values)
def test_never_raises_on_arbitrary_field_values(field: str, value: Any) -> None:
    result = check(answer(**{field: value}))
    assert result.ok == (result.reason is None)
