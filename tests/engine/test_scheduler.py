"""The pure scheduler: readiness by dependency, parallelism, resources, removal."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.scheduler import Scheduler
from protocol.graph import Graph
from support.scale import examples


def make(
    ids: str | list[str],
    edges: list[tuple[str, str]] = (),  # type: ignore[assignment]
    *,
    max_parallel: int = 64,
    touches: dict[str, list[str]] | None = None,
    unsafe: set[str] = frozenset(),  # type: ignore[assignment]
    ready_log: list[str] | None = None,
) -> tuple[Scheduler, Graph]:
    names = ids.split() if isinstance(ids, str) else ids
    graph = Graph(names, [(names.index(a), names.index(b)) for a, b in edges])
    sched = Scheduler(
        graph.preds,
        graph.succs,
        graph.topo_order(),
        max_parallel=max_parallel,
        touches=[(touches or {}).get(n, []) for n in names],
        parallel_safe=[n not in unsafe for n in names],
        on_ready=(lambda i: ready_log.append(names[i])) if ready_log is not None else None,
    )
    return sched, graph


def names(graph: Graph, indices: list[int]) -> list[str]:
    return [graph.ids[i] for i in indices]


def test_a_node_is_ready_when_its_own_predecessors_settle_not_its_tier() -> None:
    # slow -> s2 ; a -> b -> c : b must not wait for slow (same tier as a).
    sched, g = make("slow a s2 b c", [("slow", "s2"), ("a", "b"), ("b", "c")])
    sched.prepare()
    assert names(g, sched.get_ready()) == ["slow", "a"]
    sched.done(g.index["a"])
    assert names(g, sched.get_ready()) == ["b"]
    sched.done(g.index["b"])
    assert names(g, sched.get_ready()) == ["c"]
    assert sched.is_active()


def test_join_waits_for_every_predecessor() -> None:
    sched, g = make("a b c", [("a", "c"), ("b", "c")])
    sched.prepare()
    sched.get_ready()
    sched.done(g.index["a"])
    assert sched.get_ready() == []
    sched.done(g.index["b"])
    assert names(g, sched.get_ready()) == ["c"]
    sched.done(g.index["c"])
    assert not sched.is_active()


def test_max_parallel_caps_running_nodes() -> None:
    sched, g = make("a b c d e", max_parallel=2)
    sched.prepare()
    assert names(g, sched.get_ready()) == ["a", "b"]
    assert sched.get_ready() == []
    sched.done(g.index["b"])
    assert names(g, sched.get_ready()) == ["c"]
    assert sched.get_ready() == []


def test_ready_order_is_topological_position_then_plan_index() -> None:
    # z is ready from the start, y only after x; y's topological position (Kahn,
    # ties by plan index) is still ahead of z's, so y runs first.
    sched, g = make("x y z", [("x", "y")], max_parallel=1)
    sched.prepare()
    order = []
    while sched.is_active():
        (i,) = sched.get_ready()
        order.append(g.ids[i])
        sched.done(i)
    assert order == names(g, g.topo_order()) == ["x", "y", "z"]


def test_touching_the_same_resource_never_runs_together_and_others_pass() -> None:
    sched, g = make("a b c", touches={"a": ["db"], "b": ["db"], "c": ["cache"]})
    sched.prepare()
    assert names(g, sched.get_ready()) == ["a", "c"]  # b waits, c (lower priority) passes
    assert sched.get_ready() == []
    sched.done(g.index["a"])
    assert names(g, sched.get_ready()) == ["b"]


def test_waiting_node_keeps_its_place_in_line() -> None:
    # b waits for a's resource; when a settles, d (freed by a, later position) is
    # also ready, and b must come first.
    sched, g = make("a b c d", [("a", "d")], max_parallel=2, touches={"a": ["r"], "b": ["r"]})
    sched.prepare()
    assert names(g, sched.get_ready()) == ["a", "c"]
    sched.done(g.index["c"])
    sched.done(g.index["a"])
    assert names(g, sched.get_ready()) == ["b", "d"]


def test_parallel_unsafe_node_runs_alone() -> None:
    sched, g = make("a u b c", unsafe={"u"})
    sched.prepare()
    assert names(g, sched.get_ready()) == ["a", "b", "c"]  # u waits for an empty slate
    for node in "abc":
        sched.done(g.index[node])
    assert names(g, sched.get_ready()) == ["u"]


def test_nothing_starts_beside_a_running_unsafe_node() -> None:
    sched, g = make("u a", unsafe={"u"})
    sched.prepare()
    assert names(g, sched.get_ready()) == ["u"]
    assert sched.get_ready() == []
    sched.done(g.index["u"])
    assert names(g, sched.get_ready()) == ["a"]


def test_removed_pending_node_settles_only_after_its_predecessors() -> None:
    # a -> x -> c ; x is removed upfront. c may only become ready once a settled,
    # so everything c could reference has settled.
    log: list[str] = []
    sched, g = make("a x c", [("a", "x"), ("x", "c")], ready_log=log)
    sched.remove(g.index["x"])
    sched.prepare()
    assert names(g, sched.get_ready()) == ["a"]
    assert sched.get_ready() == []
    sched.done(g.index["a"])
    assert names(g, sched.get_ready()) == ["c"]
    assert log == ["a", "c"]  # x was never ready


def test_removed_root_releases_successors_at_prepare() -> None:
    sched, g = make("x c", [("x", "c")])
    sched.remove(g.index["x"])
    sched.prepare()
    assert names(g, sched.get_ready()) == ["c"]


def test_removing_a_queued_node_settles_it_at_once() -> None:
    sched, g = make("a b c", [("b", "c")], max_parallel=1)
    sched.prepare()
    assert names(g, sched.get_ready()) == ["a"]
    sched.remove(g.index["b"])  # queued behind a
    sched.done(g.index["a"])
    assert names(g, sched.get_ready()) == ["c"]
    sched.done(g.index["c"])
    assert not sched.is_active()


def test_misuse_is_an_error() -> None:
    sched, g = make("a b", [("a", "b")])
    with pytest.raises(ValueError, match=r"prepare\(\) must be called first"):
        sched.get_ready()  # before prepare
    sched.prepare()
    with pytest.raises(ValueError, match=r"prepare\(\) was already called"):
        sched.prepare()
    with pytest.raises(ValueError, match="node 1 is not ready"):
        sched.done(g.index["b"])  # never handed out
    with pytest.raises(ValueError, match="node 0 is ready but get_ready"):
        sched.done(g.index["a"])  # ready, not handed out yet
    (a,) = sched.get_ready()
    with pytest.raises(ValueError, match="node 0 is running"):
        sched.remove(a)  # running
    sched.done(a)
    with pytest.raises(ValueError, match="node 0 was already marked done"):
        sched.done(a)  # twice
    with pytest.raises(ValueError, match="node 0 was already marked done"):
        sched.remove(a)  # settled
    with pytest.raises(ValueError):
        make("a", max_parallel=0)


def test_misuse_of_a_removed_node_says_so() -> None:
    sched, g = make("a b", [("a", "b")])
    sched.remove(g.index["b"])
    with pytest.raises(ValueError, match="node 1 was already removed"):
        sched.remove(g.index["b"])
    sched.prepare()
    (a,) = sched.get_ready()
    sched.done(a)
    with pytest.raises(ValueError, match="node 1 was removed: it is never handed out"):
        sched.done(g.index["b"])


@st.composite
def random_graphs(draw: st.DrawFn) -> dict:
    n = draw(st.integers(1, 25))
    edges = sorted({(a, b) for b in range(1, n) for a in draw(st.sets(st.integers(0, b - 1), max_size=3))})
    resources = ["r1", "r2", "r3"]
    touches = [draw(st.lists(st.sampled_from(resources), max_size=2)) for _ in range(n)]
    safe = [draw(st.booleans()) or draw(st.booleans()) for _ in range(n)]
    removed = draw(st.sets(st.integers(0, n - 1), max_size=n // 3))
    return {
        "n": n,
        "edges": edges,
        "touches": touches,
        "safe": safe,
        "removed": removed,
        "max_parallel": draw(st.integers(1, 6)),
        "seed": draw(st.integers(0, 2**16)),
    }


@settings(max_examples=examples(150), deadline=None)
@given(random_graphs())
def test_random_runs_respect_every_rule_and_settle_every_node(case: dict) -> None:
    n = case["n"]
    graph = Graph([f"n{i}" for i in range(n)], case["edges"])
    sched = Scheduler(
        graph.preds,
        graph.succs,
        graph.topo_order(),
        max_parallel=case["max_parallel"],
        touches=case["touches"],
        parallel_safe=case["safe"],
    )
    for i in case["removed"]:
        sched.remove(i)
    sched.prepare()
    rng = random.Random(case["seed"])
    settled: set[int] = set()
    handed: list[int] = []
    running: list[int] = []
    while sched.is_active():
        for i in sched.get_ready():
            assert i not in case["removed"]
            ancestors = [a for a in range(n) if graph.is_ancestor(a, i)]
            assert all(a in settled or a in case["removed"] for a in ancestors)
            handed.append(i)
            running.append(i)
        assert running, "stalled with nodes left"
        assert len(running) <= case["max_parallel"]
        held = [r for i in running for r in set(case["touches"][i])]
        assert len(held) == len(set(held))
        if any(not case["safe"][i] for i in running):
            assert len(running) == 1
        i = running.pop(rng.randrange(len(running)))
        sched.done(i)
        settled.add(i)
    assert sorted(handed) == sorted(set(range(n)) - case["removed"])


# -- frames: nodes added while running, joins ------------------------------------------------


def _frames(max_parallel: int = 64, touches: dict[str, list[str]] | None = None):
    """gen -> n -> after, where n is a join its frame instances are added to."""
    joined: list[int] = []
    ready: list[int] = []
    names_ = ["gen", "n", "after"]
    graph = Graph(names_, [(0, 1), (1, 2)])
    sched = Scheduler(
        graph.preds,
        graph.succs,
        graph.topo_order(),
        max_parallel=max_parallel,
        touches=[(touches or {}).get(n, []) for n in names_],
        on_ready=ready.append,
        on_join=joined.append,
    )
    sched.join(1)
    sched.prepare()
    return sched, joined, ready


def test_an_added_node_runs_while_its_generator_runs_and_the_join_waits_for_it() -> None:
    sched, joined, ready = _frames()
    assert sched.get_ready() == [0]  # gen runs; the join n is never handed out
    first = sched.add([], 1)
    second = sched.add([first], 1)  # frame 0's next step, after first
    assert ready == [0, first] and sched.get_ready() == [first]
    sched.done(first)
    assert sched.get_ready() == [second]
    sched.done(second)
    assert joined == []  # gen still runs: more frames may come
    sched.done(0)
    assert joined == [1]
    assert sched.get_ready() == [2]
    sched.done(2)
    assert not sched.is_active()


def test_a_join_with_no_instance_settles_with_its_predecessors() -> None:
    sched, joined, _ = _frames()
    sched.get_ready()
    sched.done(0)
    assert joined == [1] and sched.get_ready() == [2]


def test_added_nodes_keep_max_parallel_and_touches() -> None:
    sched, _, _ = _frames(max_parallel=2)
    assert sched.get_ready() == [0]
    a, b, c = (sched.add([], 1, touches=["db"]) for _ in range(3))
    d = sched.add([], 1)
    assert sched.get_ready() == [a]  # gen + a fill the two slots
    sched.done(0)
    assert sched.get_ready() == [d]  # b, c touch db, which a holds
    sched.done(a)
    assert sched.get_ready() == [b]
    sched.done(d)
    sched.done(b)
    assert sched.get_ready() == [c]


def test_an_added_node_waits_for_an_unsettled_fixed_predecessor_without_changing_the_callers_lists() -> None:
    graph = Graph(["gen", "x", "n"], [(0, 1), (1, 2), (0, 2)])
    succs_before = [list(s) for s in graph.succs]
    sched = Scheduler(graph.preds, graph.succs, graph.topo_order(), max_parallel=8)
    sched.join(2)
    sched.prepare()
    assert sched.get_ready() == [0]
    inst = sched.add([1], 2)  # x has not run yet
    assert sched.get_ready() == []
    sched.done(0)
    assert sched.get_ready() == [1]
    sched.done(1)
    assert sched.get_ready() == [inst]
    assert graph.succs == succs_before


def test_join_misuse_says_which() -> None:
    sched, _, _ = _frames()
    with pytest.raises(ValueError, match="not a pending join"):
        sched.add([], 2)
    with pytest.raises(ValueError, match="before prepare"):
        sched.join(2)
    sched.get_ready()
    sched.done(0)
    with pytest.raises(ValueError, match="not a pending join"):
        sched.add([], 1)  # the join settled when gen did
    with pytest.raises(ValueError, match="made a join"):
        sched.done(1)
