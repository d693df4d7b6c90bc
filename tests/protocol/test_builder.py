"""The plan builder: seed 002's examples build, compile to plans `plan check` accepts, and bad refs fail at build time."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from protocol.builder import END, PARENT, START, BuildError, graph, op, tool
from protocol.validation import check_plan

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

_spec = importlib.util.spec_from_file_location("seed002_builder", EXAMPLES / "seed002_builder.py")
seed002 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(seed002)

upper = tool("text_transform", subnet="sn1", op="upper")
search = tool("search", subnet="sn5")


def _edges(plan) -> set[tuple[str, str]]:
    return {(e.source, e.to) for e in plan.edges}


def test_hello_compiles_to_input_and_sibling_refs():
    plan = seed002.hello.compile()
    nodes = {n.id: n for n in plan.nodes}
    assert nodes["g"].params["values"] == {"name": "${input.name}"}
    assert nodes["u"].params == {"op": "upper", "text": "${g.output.text}"}
    assert _edges(plan) == {("g", "u")}
    assert plan.output_node == "u"
    assert check_plan(plan).valid


@pytest.mark.parametrize(
    "name", ["seed002_hello", "seed002_hello_outputs", "seed002_hello_arrow", "seed002_hello_wildcard"]
)
def test_the_output_mapping_styles_compile_to_the_same_plan(name):
    assert seed002.EXAMPLES[name].compile() == seed002.hello.compile()


def test_shipped_example_plans_are_what_the_builder_compiles():
    for name, plan in seed002.compiled().items():
        assert json.loads((EXAMPLES / f"{name}.json").read_text()) == plan, name


def test_the_wrong_example_fails_at_build_time_naming_the_op_the_key_and_its_owner():
    @graph(inputs=["name"])
    def wrong():
        g = seed002.greet(name=PARENT["name"])
        u = upper(text=PARENT["greeting"])  # greeting is in g's state, not the parent's
        START >> g >> u >> END

    with pytest.raises(BuildError) as raised:
        wrong.compile()
    message = str(raised.value)
    assert message.startswith('u: PARENT["greeting"] is not a value of graph wrong (values: name)')
    assert '"greeting" is an output of g, not of the parent: write g["greeting"]' in message


def test_a_sibling_ref_must_name_a_declared_output():
    @graph(inputs=["question"])
    def bad():
        hits = search(query=PARENT["question"])
        upper(text=hits["answer"])

    with pytest.raises(BuildError, match=r"hits: search has no output 'answer' \(outputs: text, hits\)"):
        bad.compile()


def test_declared_metadata_outputs_and_deeper_paths_compile_to_their_dataref():
    @graph(inputs=["question"])
    def first_hit():
        hits = search(query=PARENT["question"])
        upper(text=hits["hits"][0]["sentence"], outputs={"*": PARENT})

    plan = first_hit.compile()
    assert plan.nodes[1].params["text"] == "${hits.output.artifacts.metadata.hits.0.sentence}"


def test_returns_must_name_something_the_action_outputs():
    with pytest.raises(BuildError, match="returns names 'score', which search does not output"):
        tool("search", subnet="sn5", returns={"best": "score"})


def test_unknown_actions_fail_when_the_factory_is_made():
    with pytest.raises(BuildError, match="unknown action 'teleport'"):
        tool("teleport", subnet="sn1")


def test_nested_graph_flattens_with_prefixed_ids_reads_parent_and_writes_upward():
    plan = seed002.graded.compile()
    nodes = {n.id: n for n in plan.nodes}
    assert list(nodes) == ["g", "verify-cls", "verify-work", "report"]
    assert nodes["verify-cls"].params == {"expression": "${input.score} * 10"}
    assert nodes["verify-work"].params["values"] == {"grade": "${verify-cls.output.artifacts.metadata.value}"}
    assert nodes["report"].params["values"] == {"hello": "${g.output.text}", "trace": "${verify-work.output.text}"}
    assert _edges(plan) == {("verify-cls", "verify-work"), ("g", "report"), ("verify-work", "report")}
    assert plan.output_node == "report"
    assert check_plan(plan).valid


def test_a_nested_graph_is_read_as_an_op_and_ordered_with_rshift():
    @graph
    def inner():
        a = upper(text=PARENT["x"])
        b = upper(text=a["text"])
        b["text"] >> PARENT["y"]

    @graph(inputs=["x"])
    def outer():
        first = upper(text=PARENT["x"])
        sub = inner(x=first["text"])
        last = upper(text=sub["y"])
        START >> first >> sub >> last >> END

    plan = outer.compile()
    assert _edges(plan) == {("first", "inner-a"), ("inner-a", "inner-b"), ("inner-b", "last")}
    assert {n.id: n for n in plan.nodes}["inner-a"].params["text"] == "${first.output.text}"


def test_explicit_order_fan_out_and_policies_compile():
    @graph(inputs=["q"])
    def fan():
        a = search(query=PARENT["q"], retry_count=2, timeout_seconds=3.0, estimated_cost=0.01)
        b = upper(text="b")
        c = upper(text="c")
        d = upper(text=f"{a['text']} {b['text']} {c['text']}")
        a >> [b, c]
        [b, c] >> d >> END

    plan = fan.compile(max_parallel=4)
    assert _edges(plan) == {("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("a", "d")}
    assert plan.error_handling["a"].retry_count == 2 and plan.nodes[0].estimated_cost == 0.01
    assert plan.nodes[3].params["text"] == "${a.output.text} ${b.output.text} ${c.output.text}"
    assert plan.max_parallel == 4


def test_the_top_level_result_comes_from_one_op():
    @graph(inputs=["q"])
    def two():
        a = upper(text=PARENT["q"])
        b = upper(text=PARENT["q"])
        a["text"] >> PARENT["x"]
        b["text"] >> PARENT["y"]

    with pytest.raises(BuildError, match="the plan's final output is one node's; a already writes"):
        two.compile()


def test_inputs_may_be_the_tasks_json_schema():
    @graph(inputs={"type": "object", "properties": {"rows": {"type": "array"}}})
    def rows():
        upper(text=PARENT["rows"][0], outputs={"*": PARENT})

    assert rows.compile().nodes[0].params["text"] == "${input.rows.0}"


def test_builder_objects_outside_a_graph_say_so():
    with pytest.raises(BuildError, match="outside a @graph"):
        upper(text="x")


@pytest.mark.parametrize(
    ("name", "inputs", "answer"),
    [
        ("seed002_hello", {"name": "Ada"}, "HELLO, ADA!"),
        ("seed002_hello_wildcard", {"name": "Ada"}, "HELLO, ADA!"),
        ("seed002_graded", {"name": "Ada", "score": 0.9}, "Hello, Ada! grade 9 of 10"),
    ],
)
def test_seed002_examples_run_through_dagnet_run_with_their_inputs(name, inputs, answer):
    from typer.testing import CliRunner

    from neurons.cli import app

    args = ["run", str(EXAMPLES / f"{name}.json"), "--inputs", json.dumps(inputs), "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["status"] == "completed"
    assert report["final_output"]["text"] == answer


def test_without_its_inputs_a_plan_reading_them_does_not_complete():
    from typer.testing import CliRunner

    from neurons.cli import app

    result = CliRunner().invoke(app, ["run", str(EXAMPLES / "seed002_hello.json"), "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["status"] != "completed"


# --- structured outputs: the builder follows a reference into a metadata value's shape ---

DOC = ROOT / "docs" / "plan-builder.md"


def _worked_example() -> dict:
    """The python blocks of plan-builder.md's step-by-step section, run in order."""
    section = DOC.read_text().split("## Step by step")[1].split("## What a mistake looks like")[0]
    namespace: dict = {}
    for block in section.split("```python\n")[1:]:
        exec(block.split("```")[0], namespace)
    return namespace


def test_the_worked_example_runs_to_completion_with_dagnet_run(tmp_path: Path) -> None:
    import subprocess
    import sys

    plan = _worked_example()["plan"]
    reply = next(n for n in plan.nodes if n.id == "reply")
    assert reply.params["values"]["a"] == "${first.output.artifacts.metadata.hits.0.sentence}"
    assert _edges(plan) == {("first", "reply"), ("second", "reply")}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan.to_wire()))
    ran = subprocess.run(
        [sys.executable, "-m", "neurons", "run", str(path), "--task", "rag_towns", "--seed", "3", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr  # 0: every node succeeded
    report = json.loads(ran.stdout)
    assert report["status"] == "completed" and report["score"]["output_quality"] == 1.0, report["score"]


def test_a_field_a_hit_does_not_have_fails_as_written_with_the_documented_message() -> None:
    @graph(inputs=["q"])
    def wrong():
        first = search(query=PARENT["q"])
        upper(text=first["hits"][0]["text"])

    with pytest.raises(BuildError) as raised:
        wrong.compile()
    assert f"\n{raised.value}\n" in DOC.read_text()


@pytest.mark.parametrize(
    ("read", "message"),
    [
        (lambda s, c: s["hits"]["best"], "hits is a list: index it with a number, not 'best'"),
        (lambda s, c: s["hits"][0]["sentence"]["x"], "hits[0].sentence is a single value: it has no 'x'"),
        (lambda s, c: c["value"]["x"], "value is a single value: it has no 'x'"),
    ],
)
def test_reads_below_a_metadata_key_follow_its_shape(read, message) -> None:
    calc = tool("calculator", subnet="sn2")

    @graph(inputs=["q"])
    def g():
        s = search(query=PARENT["q"])
        c = calc(expression="1+1")
        upper(text=read(s, c))

    with pytest.raises(BuildError, match=re.escape(message)):
        g.compile()


def test_reads_that_exist_compile() -> None:
    echo = tool("echo", subnet="sn1")
    split = tool("split", subnet="sn3")

    @graph(inputs=["q", "rows"])
    def g():
        s = search(query=PARENT["q"])
        e = echo(text="x", metadata={"any": {"thing": 1}})
        parts = split(items=PARENT["rows"])
        upper(text=f"{s['hits'][2]['score']} {e['anything']['at'][0]['all']} {parts['item']['price']}")

    assert check_plan(g.compile()).valid


def test_returns_aliases_are_checked_against_the_shape_too() -> None:
    def best(q):
        return {"query": q}

    with pytest.raises(
        BuildError, match=re.escape("best: returns names 'artifacts.metadata.hits.0.text': hits[0] is a hit")
    ):
        op("search", subnet="sn5", returns={"top": "artifacts.metadata.hits.0.text"})(best)
    factory = op("search", subnet="sn5", returns={"top": "artifacts.metadata.hits.0.sentence"})(best)
    assert factory.returns["top"] == ("artifacts", "metadata", "hits", "0", "sentence")
