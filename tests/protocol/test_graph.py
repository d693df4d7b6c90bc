"""The plan dependency graph: orders, tiers, ancestry, cycles, critical path."""

from __future__ import annotations

import pytest

from protocol.graph import CycleError, Graph
from protocol.plan import WorkflowPlan


def graph(ids: str, edges: str = "") -> Graph:
    """``graph("abc", "ab bc")``: one-letter nodes, space-separated edges."""
    index = {node_id: i for i, node_id in enumerate(ids)}
    return Graph(list(ids), [(index[e[0]], index[e[1]]) for e in edges.split()])


def names(g: Graph, order: list[int]) -> str:
    return "".join(g.ids[i] for i in order)


def test_from_plan_uses_plan_indices_and_collapses_duplicate_edges() -> None:
    plan = WorkflowPlan.model_validate(
        {
            "nodes": [{"id": n, "subnet": "s", "action": "x"} for n in ("x", "y", "z")],
            "edges": [{"from": "x", "to": "z"}, {"from": "x", "to": "z"}, {"from": "y", "to": "z"}],
        }
    )
    g = Graph.from_plan(plan)
    assert g.ids == ["x", "y", "z"] and g.index == {"x": 0, "y": 1, "z": 2}
    assert g.preds == [[], [], [0, 1]]
    assert g.succs == [[2], [2], []]


def test_roots_in_plan_order() -> None:
    assert graph("abcd", "ba dc").roots() == [1, 3]


def test_topo_order_breaks_ties_by_plan_index() -> None:
    g = graph("abcde", "ec ca bd")
    assert names(g, g.topo_order()) == "bdeca"


def test_topo_order_respects_every_edge_on_a_diamond() -> None:
    g = graph("dcba", "ab ac bd cd")
    assert names(g, g.topo_order()) == "acbd"


def test_tiers_are_kahn_levels_in_plan_order() -> None:
    g = graph("abcde", "ac bc cd ae")
    assert g.tiers() == [["a", "b"], ["c", "e"], ["d"]]


@pytest.mark.parametrize(
    ("ids", "edges", "message"),
    [
        ("ab", "ab ba", "cycle: a -> b -> a"),
        ("a", "aa", "cycle: a -> a"),
        ("rabc", "ra ab bc ca", "cycle: a -> b -> c -> a"),
        ("xcba", "xa ab bc cb", "cycle: c -> b -> c"),  # starts at its lowest plan index
    ],
)
def test_cycle_error_names_a_real_cycle(ids: str, edges: str, message: str) -> None:
    g = graph(ids, edges)
    with pytest.raises(CycleError) as info:
        g.topo_order()
    assert str(info.value) == message
    cycle = info.value.cycle
    assert cycle[0] == cycle[-1]
    pairs = {(e[0], e[1]) for e in edges.split()}
    assert all((u, v) in pairs for u, v in zip(cycle, cycle[1:]))


def test_tiers_and_critical_path_refuse_cycles() -> None:
    g = graph("ab", "ab ba")
    with pytest.raises(CycleError):
        g.tiers()
    with pytest.raises(CycleError):
        g.critical_path([1.0, 1.0])


def test_is_ancestor_follows_paths_not_only_edges() -> None:
    g = graph("abcde", "ab bc dc")
    assert g.is_ancestor(0, 2)
    assert g.is_ancestor(3, 2)
    assert not g.is_ancestor(2, 0)
    assert not g.is_ancestor(0, 3)
    assert not g.is_ancestor(0, 0)
    assert not g.is_ancestor(4, 2)


def test_critical_path_is_longest_weighted_path() -> None:
    g = graph("abcd", "ab bd ac cd")
    assert g.critical_path([1.0, 5.0, 2.0, 1.0]) == 7.0
    assert graph("ab").critical_path([3.0, 4.0]) == 4.0


def test_ten_thousand_nodes() -> None:
    n = 10_000
    edges = [(i - 1, i) for i in range(1, n)] + [(i // 2, i) for i in range(1, n)]
    g = Graph([f"n{i}" for i in range(n)], edges)
    order = g.topo_order()
    assert order == list(range(n))
    assert len(g.tiers()) == n
    assert g.is_ancestor(0, n - 1) and not g.is_ancestor(n - 1, 0)
    assert g.critical_path([1.0] * n) == n


def test_longest_path_names_the_critical_nodes_in_order():
    # a -> b -> d (1 + 5 + 1) beats a -> c -> d (1 + 2 + 1)
    graph = Graph(["a", "b", "c", "d"], [(0, 1), (0, 2), (1, 3), (2, 3)])
    length, path = graph.longest_path([1.0, 5.0, 2.0, 1.0])
    assert length == 7.0 == graph.critical_path([1.0, 5.0, 2.0, 1.0])
    assert [graph.ids[i] for i in path] == ["a", "b", "d"]
    assert Graph([], []).longest_path([]) == (0.0, [])
