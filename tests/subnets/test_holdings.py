"""Held data (subnets/holdings.py): only search(collection=) and csv_to_json(table=) read
what a task's subnets hold; every other node sees the id and nothing more."""

from __future__ import annotations

import asyncio
import json

import pytest

from neurons.localrun import run_document
from protocol.documents import PlanDocument
from protocol.plan import WorkflowPlan
from protocol.runner import FrameRunner, NodeCall, NodeResult
from subnets.base import ToolContext, ToolError
from subnets.holdings import holding, resolve_held
from subnets.owned import owned_runner
from subnets.registry import default_registry
from subnets.runner import LocalRunner
from tasks import family

DOCS = [{"id": "a", "title": "Lorvami", "text": "Lorvami has a population of 4321 residents."}]
HOLDINGS = {"c-00000001": DOCS, "t-00000002": "k,lo\n3,-5\n"}


def _call(action: str, **params: object) -> NodeCall:
    return NodeCall("t", "n", "sn1", action, dict(params))


class _Seen:
    """A runner that records the calls it is given, as a remote provider would see them."""

    def __init__(self) -> None:
        self.calls: list[NodeCall] = []

    async def run(self, call: NodeCall) -> NodeResult:
        self.calls.append(call)
        return NodeResult(None, error="seen")


def test_the_two_readers_get_the_held_data_in_place_of_the_id() -> None:
    search = resolve_held(_call("search", query="q", collection="c-00000001", k=1), HOLDINGS)
    table = resolve_held(_call("csv_to_json", table="t-00000002", numeric=True), HOLDINGS)
    assert search.params == {"query": "q", "k": 1, "documents": DOCS}
    assert table.params == {"numeric": True, "csv": "k,lo\n3,-5\n"}


@pytest.mark.parametrize(
    "action, params",
    [
        ("text_transform", {"op": "template", "text": "{c}", "values": {"c": "c-00000001"}}),
        ("text_transform", {"op": "strip", "text": "x", "collection": "c-00000001", "table": "t-00000002"}),
        ("python_exec", {"code": "print(1)", "stdin": "t-00000002", "table": "t-00000002"}),
        ("calculator", {"expression": "1 + 1", "collection": "c-00000001"}),
        ("json_transform", {"data": "t-00000002", "ops": [], "table": "t-00000002"}),
        ("search", {"query": "q", "documents": DOCS}),
    ],
)
def test_every_other_call_passes_through_untouched(action: str, params: dict) -> None:
    call = _call(action, **params)
    assert resolve_held(call, HOLDINGS) is call


@pytest.mark.parametrize(
    "params, message",
    [
        ({"query": "q", "collection": "c-ffffffff"}, "search: no held collection 'c-ffffffff' for this task"),
        ({"query": "q", "collection": ["c-00000001"]}, "search: no held collection ['c-00000001'] for this task"),
        (
            {"query": "q", "collection": "c-00000001", "documents": DOCS},
            "search: give collection or documents, not both",
        ),
    ],
)
def test_a_bad_id_fails_that_node_with_one_line_naming_it(params: dict, message: str) -> None:
    seen = _Seen()
    result = asyncio.run(holding(seen, HOLDINGS).run(_call("search", **params)))
    assert result.output is None and result.error == message and "\n" not in message
    assert seen.calls == []  # never reaches the provider


def test_a_provider_is_sent_the_documents_never_the_id() -> None:
    seen = _Seen()
    asyncio.run(holding(seen, HOLDINGS).run(_call("search", query="q", collection="c-00000001")))
    assert seen.calls[0].params == {"query": "q", "documents": DOCS}
    assert "c-00000001" not in json.dumps(seen.calls[0].params)


def test_a_frame_runner_stays_one_and_wrapping_twice_wraps_once() -> None:
    local = holding(LocalRunner(default_registry()), HOLDINGS)
    assert isinstance(local, FrameRunner) and not isinstance(holding(_Seen(), HOLDINGS), FrameRunner)
    assert holding(local, HOLDINGS) is local
    assert holding(local, {}) is not local


@pytest.mark.parametrize(
    "action, params, field",
    [
        ("search", {"query": "population", "collection": "c-00000001"}, "collection 'c-00000001' is held data"),
        ("csv_to_json", {"table": "t-00000002"}, "table 't-00000002' is held data"),
    ],
)
async def test_an_id_that_reaches_a_tool_unresolved_fails_saying_so(action: str, params: dict, field: str) -> None:
    with pytest.raises(ToolError, match=field):
        await default_registry().call(action, params, ToolContext("t", "n", 1, 5.0))


async def test_a_text_node_handed_the_id_sees_the_id_and_a_search_sees_the_documents() -> None:
    found = family("rag_towns")
    task = found.task(found.instance(11))
    held_id = task.instance_inputs["collection"]
    subject = task.instance_inputs["subjects"][0]
    plan = WorkflowPlan.model_validate(
        {
            "nodes": [
                {
                    "id": "peek",
                    "subnet": _first(task, "text"),
                    "action": "text_transform",
                    "params": {"op": "template", "text": "{c}", "values": {"c": "${input.collection}"}},
                },
                {
                    "id": "find",
                    "subnet": _first(task, "retrieval"),
                    "action": "search",
                    "params": {"query": f"{subject} population", "collection": "${input.collection}", "k": 1},
                },
            ],
            "error_handling": {"peek": {"retry_count": 1}, "find": {"retry_count": 1}},
        }
    )
    report = await run_document(PlanDocument(plan, 0.0, "synapse"), task=task)
    outputs = {node_id: node["output"] for node_id, node in report["nodes"].items()}
    assert outputs["peek"]["text"] == held_id
    assert subject in outputs["find"]["text"] and subject in task.reference["reference_answer"]


def test_the_owned_runner_holds_the_task_s_data() -> None:
    found = family("dt_sales")
    task = found.task(found.instance(3))
    seen = asyncio.run(
        owned_runner(task).run(
            NodeCall(
                task.task_id,
                "rows",
                _first(task, "data"),
                "csv_to_json",
                {"table": task.instance_inputs["table"]},
                attempt=2,
            )
        )
    )
    assert seen.error is None and json.loads(seen.output.text)[0] == _first_row(task)


def _first(task, kind: str) -> str:
    return next(name for name in task.constraints.allowed_subnets if task.available_tools[name].type == kind)


def _first_row(task) -> dict:
    header, first = task.holdings[task.instance_inputs["table"]].splitlines()[:2]
    return dict(zip(header.split(","), first.split(",")))
