"""The action catalogue and what ``check_plan`` makes of it; ``${input.*}`` refs checked
against a task's input schema."""

from __future__ import annotations

import pytest

from protocol.actions import ACTIONS, TOOL_TYPES, admission_error
from protocol.synapse import Constraints, TaskPackage, ToolInfo
from protocol.validation import check_plan, check_plan_for
from support.plans import node, plan

TOOLS = {"sn1": ToolInfo(type="text"), "sn2": ToolInfo(type="math"), "sn3": ToolInfo(type="retrieval")}
SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "rows": {"type": "array", "items": {"type": "object", "properties": {"price": {"type": "number"}}}},
        "extra": {"type": "object", "additionalProperties": {"type": "number"}},
    },
}


def test_every_offered_action_is_in_the_catalogue_and_echo_is_offered_by_no_type() -> None:
    offered = set().union(*TOOL_TYPES.values())
    assert offered <= set(ACTIONS)
    assert "echo" in ACTIONS and "echo" not in offered


def test_catalogue_matches_the_reference_tools() -> None:
    from subnets.registry import default_registry

    assert set(default_registry().names()) == set(ACTIONS) - {"llm"}


@pytest.mark.parametrize(
    ("action", "subnet_type", "expected"),
    [
        ("calculator", "math", None),
        ("calculator", "text", "action 'calculator' is not offered by subnet snX (type 'text')"),
        ("echo", "text", "action 'echo' is not offered by subnet snX (type 'text')"),
        ("echo", None, None),
        ("teleport", None, "unknown action 'teleport'"),
        ("search", "telepathy", "action 'search' is not offered by subnet snX (type 'telepathy')"),
    ],
)
def test_admission(action: str, subnet_type: str | None, expected: str | None) -> None:
    assert admission_error(action, "snX", subnet_type) == expected


def test_off_type_and_echo_nodes_make_the_plan_invalid_under_a_task() -> None:
    p = plan(
        node("a", "calculator", subnet="sn1", expression="1"),
        node("b", "echo", subnet="sn2", text="x"),
        node("c", "search", subnet="sn9"),
    )
    errors = check_plan(p, tools=TOOLS).errors
    assert errors == [
        "node a: action 'calculator' is not offered by subnet sn1 (type 'text')",
        "node b: action 'echo' is not offered by subnet sn2 (type 'math')",
        "node c: subnet sn9 is not among the task's tools",
    ]
    assert check_plan(plan(node("b", "echo", subnet="sn2", text="x"))).valid  # no task: echo is fine for dry runs


def test_unknown_action_is_an_error_even_without_a_task() -> None:
    assert check_plan(plan(node("a", "teleport", subnet="sn1"))).errors == ["node a: unknown action 'teleport'"]


def test_input_is_a_reserved_node_id() -> None:
    assert (
        "node id 'input' is reserved for the task's inputs"
        in check_plan(plan(node("input", "echo", subnet="sn1"))).errors
    )


def test_refs_to_outputs_an_action_does_not_declare_block_the_node() -> None:
    p = plan(
        node("s", "search", subnet="sn3", query="q"),
        node(
            "ok",
            "text_transform",
            subnet="sn1",
            op="template",
            text="{a}",
            values={"a": "${s.output.artifacts.metadata.hits.0.sentence}"},
        ),
        node("bad", "text_transform", subnet="sn1", op="upper", text="${s.output.artifacts.code}"),
        node("worse", "text_transform", subnet="sn1", op="upper", text="${s.output.artifacts.metadata.value}"),
        edges="s>ok s>bad s>worse",
    )
    check = check_plan(p, tools=TOOLS)
    assert check.runnable
    assert check.node_errors == {
        "bad": "undeclared_output:${s.output.artifacts.code}",
        "worse": "undeclared_output:${s.output.artifacts.metadata.value}",
    }


@pytest.mark.parametrize(
    ("ref", "declared"),
    [
        ("${input.city}", True),
        ("${input.rows}", True),
        ("${input.rows.3.price}", True),
        ("${input.extra.anything}", True),
        ("${input.country}", False),
        ("${input.rows.first}", False),
        ("${input.city.length}", False),
        ("${input.rows.0.name}", False),
    ],
)
def test_input_refs_are_checked_against_the_schema(ref: str, declared: bool) -> None:
    p = plan(node("a", "text_transform", subnet="sn1", op="upper", text=ref))
    check = check_plan(p, tools=TOOLS, input_schema=SCHEMA)
    assert check.node_errors == ({} if declared else {"a": f"undeclared_input:{ref}"})
    assert check_plan(p, tools=TOOLS).valid  # no schema given: not checked


def test_input_refs_need_no_edge() -> None:
    p = plan(
        node("a", "text_transform", subnet="sn1", op="upper", text="${input.city}"),
        node("b", "text_transform", subnet="sn1", op="upper", text="${a.output.text} ${input.city}"),
        edges="a>b",
    )
    check = check_plan(p, input_schema=SCHEMA)
    assert check.valid
    assert check.compiled["b"].sources == {"a"}


def test_check_plan_for_reads_the_package() -> None:
    package = TaskPackage(
        task_id="t",
        task_type="rag",
        inputs=SCHEMA,
        available_tools=TOOLS,
        constraints=Constraints(allowed_subnets=["sn1"]),
    )
    p = plan(node("a", "calculator", subnet="sn2", expression="${input.nope}"))
    check = check_plan_for(p, package)
    assert check.errors == ["node a: disallowed subnet sn2"]
    assert check.node_errors == {"a": "undeclared_input:${input.nope}"}
