"""Static plan checks (docs/dataref.md, docs/execution.md): fatal errors, per-node blocks, display data."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.limits import Limits
from protocol.plan import WorkflowPlan
from protocol.validation import NO_ROOTS, check_plan
from support.plans import node, plan
from support.scale import examples


class TestSeed000Example:
    def test_a_c_b_c_with_c_referencing_only_a_is_valid(self) -> None:
        p = plan(
            node("A", estimated_latency=1.0),
            node("B", estimated_latency=2.0),
            node("C", estimated_latency=0.5, q="${A.output.text}"),
            edges="A>C B>C",
        )
        check = check_plan(p)
        assert check.valid and check.runnable
        assert check.errors == [] and check.node_errors == {}
        assert check.tiers == [["A", "B"], ["C"]]
        assert check.critical_path_s == 2.5
        assert set(check.compiled) == {"A", "B", "C"}
        assert check.compiled["C"].sources == frozenset({"A"})
        assert check.graph is not None and check.graph.ids == ["A", "B", "C"]


class TestFatalErrors:
    def test_empty_plan(self) -> None:
        check = check_plan(plan())
        assert check.errors == ["plan has no nodes"] and not check.runnable

    def test_too_many_nodes_and_edges(self) -> None:
        p = plan(node("a"), node("b"), node("c"), edges="a>b b>c a>c")
        assert check_plan(p, limits=Limits(max_nodes=2, max_edges=2)).errors == [
            "too many nodes: 3 > 2",
            "too many edges: 3 > 2",
        ]
        assert check_plan(p, limits=Limits(max_nodes=3, max_edges=3)).valid

    def test_duplicate_node_id(self) -> None:
        check = check_plan(plan(node("a"), node("b"), node("a"), node("a")))
        assert check.errors == ["duplicate node id: a"]
        assert check.graph is None

    def test_edge_naming_unknown_nodes(self) -> None:
        check = check_plan(plan(node("a"), edges="a>ghost ghost2>a"))
        assert check.errors == [
            "edge 0 (a -> ghost): unknown node ghost",
            "edge 1 (ghost2 -> a): unknown node ghost2",
        ]

    def test_unknown_names_are_quoted_and_truncated(self) -> None:
        p = WorkflowPlan.model_validate({"nodes": [node("a")], "edges": [{"from": "a", "to": "bad id\n" + "x" * 200}]})
        [error] = check_plan(p).errors
        assert "'bad id\\nxxx" in error and "..." in error and len(error) < 250

    def test_self_loop(self) -> None:
        check = check_plan(plan(node("a"), node("b"), edges="a>b b>b"))
        assert check.errors == ["edge 1 (b -> b): self loop"]

    def test_no_roots(self) -> None:
        check = check_plan(plan(node("a"), node("b"), edges="a>b b>a"))
        assert NO_ROOTS == "graph has no roots — cycle or malformed deps"
        assert check.errors[0] == NO_ROOTS
        assert "cycle: a -> b -> a" in check.errors

    def test_cycle_behind_a_root(self) -> None:
        check = check_plan(plan(node("r"), node("a"), node("b"), node("c"), edges="r>a a>b b>c c>a"))
        assert check.errors == ["cycle: a -> b -> c -> a"]
        assert check.tiers == [] and check.graph is None

    def test_params_too_deep(self) -> None:
        deep: dict = {"leaf": 1}
        for _ in range(3):
            deep = {"n": deep}
        check = check_plan(plan(node("a", **deep)), limits=Limits(max_param_depth=3))
        assert check.errors == ["node a: params nested deeper than 3 levels"]
        assert check_plan(plan(node("a", **deep)), limits=Limits(max_param_depth=4)).valid

    def test_disallowed_subnet(self) -> None:
        p = plan(node("a", subnet="sn1"), node("b", subnet="sn9"))
        assert check_plan(p, allowed_subnets=["sn1", "sn2"]).errors == ["node b: disallowed subnet sn9"]
        assert check_plan(p, allowed_subnets=None).valid

    def test_error_handling_and_output_node_naming_unknown_nodes(self) -> None:
        p = plan(node("a"), error_handling={"a": {}, "zz": {"retry_count": 1}}, output_node="out")
        assert check_plan(p).errors == ["error_handling: unknown node zz", "output_node: unknown node out"]

    def test_collects_several_errors(self) -> None:
        p = plan(node("a", subnet="x"), node("a"), edges="a>q", output_node="q")
        errors = check_plan(p, allowed_subnets=["sn1"]).errors
        assert "duplicate node id: a" in errors
        assert "edge 0 (a -> q): unknown node q" in errors
        assert "output_node: unknown node q" in errors
        assert "node a: disallowed subnet x" in errors


class TestNodeErrors:
    def test_ref_to_non_ancestor_blocks_only_that_node(self) -> None:
        p = plan(node("a"), node("b"), node("c", q="${b.output.text}"), edges="a>c")
        check = check_plan(p)
        assert check.runnable and not check.valid
        assert check.node_errors == {"c": "dataref_not_upstream:b"}
        assert set(check.compiled) == {"a", "b"}

    def test_ref_to_unknown_node(self) -> None:
        check = check_plan(plan(node("a", q="x ${ghost.output.text}")))
        assert check.node_errors == {"a": "dataref_not_upstream:ghost"}

    def test_ref_to_downstream_or_self(self) -> None:
        p = plan(node("a", q="${b.output.text}"), node("b", q="${b.output.text}"), edges="a>b")
        assert check_plan(p).node_errors == {
            "a": "dataref_not_upstream:b",
            "b": "dataref_not_upstream:b",
        }

    def test_ref_to_transitive_ancestor_is_fine(self) -> None:
        p = plan(node("a"), node("b"), node("c", q="${a.output.artifacts.metadata.k.0}"), edges="a>b b>c")
        assert check_plan(p).valid

    def test_first_offending_ref_is_reported(self) -> None:
        p = plan(
            node("a"), node("b"), node("c", x="${a.output.text}", y="${z.output.text} ${b.output.text}"), edges="a>c"
        )
        assert check_plan(p).node_errors == {"c": "dataref_not_upstream:z"}

    def test_bad_syntax(self) -> None:
        check = check_plan(plan(node("a", q="${a.oops}")))
        assert check.runnable
        assert check.node_errors == {"a": "bad_dataref:invalid DataRef syntax: '${a.oops}'"}
        assert "a" not in check.compiled


# Hypothesis: random plans, duplicates, cycles and self loops included.
_ids = st.sampled_from(["a", "b", "c", "d", "e", "f"])


@st.composite
def _random_plans(draw: st.DrawFn) -> WorkflowPlan:
    ids = draw(st.lists(_ids, max_size=7))
    edge_ends = st.one_of(st.sampled_from(ids), _ids) if ids else _ids
    edges = draw(st.lists(st.tuples(edge_ends, edge_ends), max_size=12))
    refs = st.builds(lambda i, t: f"{t} ${{{i}.output.text}}", _ids, st.sampled_from(["", "x", "$", "${"]))
    nodes = [
        node(i, estimated_latency=draw(st.floats(0, 5)), q=draw(st.one_of(st.text(max_size=5), refs))) for i in ids
    ]
    return plan(*nodes, edges=" ".join(f"{a}>{b}" for a, b in edges))


@st.composite
def _acyclic_plans(draw: st.DrawFn) -> WorkflowPlan:
    """Unique ids and forward edges only, so most of these are runnable."""
    ids = draw(st.lists(_ids, min_size=1, max_size=6, unique=True))
    pairs = st.tuples(st.integers(0, len(ids) - 1), st.integers(0, len(ids) - 1))
    edges = [(ids[min(i, j)], ids[max(i, j)]) for i, j in draw(st.lists(pairs, max_size=10)) if i != j]
    nodes = [node(i, q=f"${{{draw(_ids)}.output.text}}") for i in ids]
    return plan(*nodes, edges=" ".join(f"{a}>{b}" for a, b in edges))


@settings(max_examples=examples(400), deadline=None)
@given(p=st.one_of(_random_plans(), _acyclic_plans()))
def test_check_plan_never_raises_and_runnable_means_topologically_ordered(p: WorkflowPlan) -> None:
    check = check_plan(p, allowed_subnets=["sn1"])
    assert check.valid == (check.runnable and not check.node_errors)
    if not check.runnable:
        return
    assert check.graph is not None
    order = check.graph.topo_order()
    assert sorted(order) == list(range(len(p.nodes)))
    position = {v: k for k, v in enumerate(order)}
    for edge in p.edges:
        assert position[check.graph.index[edge.source]] < position[check.graph.index[edge.to]]
    assert sorted(i for tier in check.tiers for i in tier) == sorted(n.id for n in p.nodes)
    for node_id, compiled in check.compiled.items():
        for source in compiled.sources:
            assert check.graph.is_ancestor(check.graph.index[source], check.graph.index[node_id])
