"""Task-list DAG import and plan-document loading (docs/protocol.md)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from protocol.dataref import compile_params
from protocol.documents import PlanLoadError, load_plan_document
from protocol.seed004 import import_seed004, is_seed004
from protocol.validation import check_plan

# The example of the task-list format's own documentation, verbatim.
SEED_EXAMPLE = {
    "dag": [
        {
            "id": "find_emperor_wu_age",
            "tool": "serper_web_search",
            "query": "age of Emperor Wu of Han at death",
            "dependencies": [],
        },
        {
            "id": "find_caesar_age",
            "tool": "serper_web_search",
            "query": "age of Julius Caesar at death",
            "dependencies": [],
        },
        {
            "id": "calculate_difference",
            "tool": "calculator",
            "query": "Calculate the difference between {{find_emperor_wu_age.result}} and {{find_caesar_age.result}}",
            "dependencies": ["find_emperor_wu_age", "find_caesar_age"],
        },
    ]
}


def task(task_id: str, query: str = "q", deps: list[str] | None = None, tool: str = "echo") -> dict:
    return {"id": task_id, "tool": tool, "query": query, "dependencies": deps or []}


def query_of(doc: dict, node_id: str) -> str:
    plan = import_seed004(doc)
    return next(n.params["query"] for n in plan.nodes if n.id == node_id)


class TestSeedExample:
    def test_three_nodes_two_edges_and_datarefs(self) -> None:
        plan = import_seed004(SEED_EXAMPLE)
        assert [n.id for n in plan.nodes] == ["find_emperor_wu_age", "find_caesar_age", "calculate_difference"]
        assert [n.action for n in plan.nodes] == ["search", "search", "calculator"]
        assert {n.subnet for n in plan.nodes} == {"local"}
        assert [(e.source, e.to) for e in plan.edges] == [
            ("find_emperor_wu_age", "calculate_difference"),
            ("find_caesar_age", "calculate_difference"),
        ]
        assert plan.nodes[2].params == {
            "query": "Calculate the difference between ${find_emperor_wu_age.output.text}"
            " and ${find_caesar_age.output.text}"
        }
        assert plan.nodes[0].params == {"query": "age of Emperor Wu of Han at death"}

    def test_imported_plan_is_valid_and_independent_tasks_share_a_tier(self) -> None:
        check = check_plan(import_seed004(SEED_EXAMPLE))
        assert check.valid
        assert check.tiers == [["find_emperor_wu_age", "find_caesar_age"], ["calculate_difference"]]

    def test_subnet_is_configurable(self) -> None:
        assert {n.subnet for n in import_seed004(SEED_EXAMPLE, subnet="sn7").nodes} == {"sn7"}

    def test_input_document_not_modified(self) -> None:
        before = copy.deepcopy(SEED_EXAMPLE)
        import_seed004(SEED_EXAMPLE)
        assert SEED_EXAMPLE == before


class TestTemplates:
    def test_named_field_maps_to_metadata(self) -> None:
        doc = {"dag": [task("a"), task("b", "x={{a.year}} y={{ a.info.born }}", ["a"])]}
        assert query_of(doc, "b") == "x=${a.output.artifacts.metadata.year} y=${a.output.artifacts.metadata.info.born}"

    def test_literal_dollar_brace_is_escaped_and_survives_resolution(self) -> None:
        doc = {"dag": [task("a"), task("b", "cost ${x} $${y} {{a.result}}", ["a"])]}
        query = query_of(doc, "b")
        resolved = compile_params({"query": query}).resolve({"a": {"text": "T", "artifacts": {}}})
        assert resolved == {"query": "cost ${x} $${y} T"}

    def test_non_template_braces_stay_literal(self) -> None:
        doc = {"dag": [task("a", "{{not a template}} {single}")]}
        assert query_of(doc, "a") == "{{not a template}} {single}"

    def test_other_tools_keep_their_name(self) -> None:
        doc = {"dag": [task("a", tool="web_search"), task("b", tool="calculator")]}
        assert [n.action for n in import_seed004(doc).nodes] == ["search", "calculator"]


class TestMalformed:
    @pytest.mark.parametrize(
        ("doc", "message"),
        [
            ({"dag": "x"}, "dag: expected a list"),
            ({"dag": [3]}, r"dag\[0\]: expected an object"),
            ({"dag": [{"id": "a", "tool": "t", "query": "q"}]}, r"dag\[0\].dependencies: missing"),
            ({"dag": [task("a"), {**task("b"), "query": 5}]}, r"dag\[1\].query: expected str, got int"),
            ({"dag": [{**task("a"), "dependencies": "b"}]}, r"dag\[0\].dependencies: expected list"),
            ({"dag": [task("a b")]}, r"dag\[0\].id: 'a b' must match"),
            ({"dag": [task("a", tool="")]}, r"dag\[0\].tool: must be 1 to 128"),
            ({"dag": [task("a", deps=["zz"])]}, r"dag\[0\].dependencies\[0\]: unknown task id 'zz'"),
            ({"dag": [task("a", deps=[1])]}, r"dag\[0\].dependencies\[0\]: expected str"),
            (
                {"dag": [task("a"), task("b", "{{a.result}}")]},
                r"dag\[1\].query: template '\{\{a.result\}\}' names 'a', not in dependencies",
            ),
            ({"dag": [task("a"), task("b", "${{a.result}}", ["a"])]}, r"dag\[1\].query: '\$' directly before"),
        ],
    )
    def test_clear_value_error(self, doc: dict, message: str) -> None:
        with pytest.raises(ValueError, match=message):
            import_seed004(doc)

    def test_graph_problems_are_left_to_check_plan(self) -> None:
        doc = {"dag": [task("a", deps=["b"]), task("b", deps=["a"])]}
        assert "cycle: a -> b -> a" in check_plan(import_seed004(doc)).errors


def test_is_seed004() -> None:
    assert is_seed004(SEED_EXAMPLE)
    assert is_seed004({"dag": "malformed"})
    assert not is_seed004({"nodes": []})
    assert not is_seed004([{"dag": []}])


class TestLoadPlanDocument:
    BARE: dict[str, Any] = {"nodes": [{"id": "a", "subnet": "sn1", "action": "echo"}]}

    def test_bare_plan(self) -> None:
        loaded = load_plan_document(self.BARE)
        assert (loaded.kind, loaded.total_estimated_cost) == ("plan", None)
        assert [n.id for n in loaded.plan.nodes] == ["a"]

    def test_synapse_response_without_task_fields(self) -> None:
        loaded = load_plan_document({"workflow_plan": self.BARE, "total_estimated_cost": 0.25, "confidence": 0.5})
        assert (loaded.kind, loaded.total_estimated_cost) == ("synapse", 0.25)

    def test_seed004(self) -> None:
        loaded = load_plan_document(SEED_EXAMPLE)
        assert loaded.kind == "seed004" and len(loaded.plan.nodes) == 3

    @pytest.mark.parametrize(
        ("doc", "message"),
        [
            ([], "expected a JSON object, got list"),
            ({"nodes": [{"id": "a b", "subnet": "s", "action": "x"}]}, "nodes.0.id: String should match pattern"),
            ({"nodes": [{"id": "a", "subnet": "s"}]}, "nodes.0.action: Field required"),
            ({"nodes": [], "edges": [{"to": "a"}]}, "edges.0.from: Field required"),
            ({"workflow_plan": {"nodes": 1}}, "workflow_plan.nodes: Input should be a valid list"),
            ({"workflow_plan": BARE, "total_estimated_cost": -1}, "total_estimated_cost: Input should be greater"),
            ({"dag": [{"id": "a"}]}, r"task-list dag\[0\].tool: missing"),
            ({"nodes": [BARE["nodes"][0]], "bogus": 1}, "bogus: Extra inputs are not permitted"),
        ],
    )
    def test_errors_name_the_field(self, doc: Any, message: str) -> None:
        with pytest.raises(PlanLoadError, match=message):
            load_plan_document(doc)

    def test_many_errors_are_summarised(self) -> None:
        nodes = [{"id": f"bad id {i}", "subnet": "s", "action": "x"} for i in range(9)]
        with pytest.raises(PlanLoadError) as info:
            load_plan_document({"nodes": nodes})
        assert str(info.value).endswith("and 4 more errors")
