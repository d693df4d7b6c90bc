"""The dependency graph of a workflow plan, in integer indices.

Nodes are numbered by their position in ``plan.nodes``; every ordering here breaks
ties by that index, so two validators always agree. Ancestor sets are Python-int
bitsets built lazily on the first :meth:`Graph.is_ancestor` call, which keeps plans
of 10,000+ nodes cheap.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from .plan import WorkflowPlan

__all__ = ["CycleError", "Graph"]


class CycleError(ValueError):
    """The graph has a cycle; ``cycle`` lists its node ids, the first repeated last."""

    def __init__(self, cycle: list[str]) -> None:
        super().__init__("cycle: " + " -> ".join(cycle))
        self.cycle = cycle


class Graph:
    """Predecessor/successor lists over node indices, duplicate edges collapsed."""

    __slots__ = ("ids", "index", "preds", "succs", "_order", "_ancestors")

    def __init__(self, ids: list[str], edges: Sequence[tuple[int, int]]) -> None:
        self.ids = ids
        self.index = {node_id: i for i, node_id in enumerate(ids)}
        self.preds: list[list[int]] = [[] for _ in ids]
        self.succs: list[list[int]] = [[] for _ in ids]
        for src, dst in dict.fromkeys(edges):
            self.preds[dst].append(src)
            self.succs[src].append(dst)
        self._order: list[int] | None = None
        self._ancestors: list[int] | None = None

    @classmethod
    def from_plan(cls, plan: WorkflowPlan) -> Graph:
        """Build the graph; assumes unique ids and edges naming existing nodes."""
        ids = [node.id for node in plan.nodes]
        index = {node_id: i for i, node_id in enumerate(ids)}
        return cls(ids, [(index[edge.source], index[edge.to]) for edge in plan.edges])

    def roots(self) -> list[int]:
        """Nodes without predecessors, in plan order."""
        return [i for i, preds in enumerate(self.preds) if not preds]

    def topo_order(self) -> list[int]:
        """Kahn's order, ties broken by lowest plan index; raises :class:`CycleError`."""
        if self._order is None:
            self._order = self._kahn()
        return list(self._order)

    def tiers(self) -> list[list[str]]:
        """Kahn levels (longest distance from a root), each in plan order. For display."""
        level = [0] * len(self.ids)
        for v in self.topo_order():
            for p in self.preds[v]:
                level[v] = max(level[v], level[p] + 1)
        tiers: list[list[str]] = [[] for _ in range(max(level, default=-1) + 1)]
        for i, node_id in enumerate(self.ids):
            tiers[level[i]].append(node_id)
        return tiers

    def is_ancestor(self, a: int, b: int) -> bool:
        """Whether ``a`` reaches ``b`` through one or more edges (acyclic graphs only)."""
        if self._ancestors is None:
            self._ancestors = self._ancestor_sets()
        return bool(self._ancestors[b] >> a & 1)

    def critical_path(self, durations: Sequence[float]) -> float:
        """The largest sum of ``durations`` (by node index) along any path."""
        return self.longest_path(durations)[0]

    def longest_path(self, durations: Sequence[float]) -> tuple[float, list[int]]:
        """The critical path's length and its nodes, first to last (``(0.0, [])`` when empty)."""
        finish = [0.0] * len(self.ids)
        before: list[int | None] = [None] * len(self.ids)
        for v in self.topo_order():
            for p in self.preds[v]:
                if before[v] is None or finish[p] > finish[before[v]]:  # type: ignore[index]
                    before[v] = p
            previous = before[v]
            finish[v] = durations[v] + (finish[previous] if previous is not None else 0.0)
        if not finish:
            return 0.0, []
        last = max(range(len(finish)), key=finish.__getitem__)
        length = finish[last]
        node: int | None = last
        path: list[int] = []
        while node is not None:
            path.append(node)
            node = before[node]
        return length, path[::-1]

    def _kahn(self) -> list[int]:
        # remaining[v] counts v's predecessors not yet emitted; v is ready at zero.
        remaining = [len(preds) for preds in self.preds]
        ready = [i for i, count in enumerate(remaining) if count == 0]
        order: list[int] = []
        while ready:
            v = heapq.heappop(ready)
            order.append(v)
            for s in self.succs[v]:
                remaining[s] -= 1
                if remaining[s] == 0:
                    heapq.heappush(ready, s)
        if len(order) < len(self.ids):
            raise CycleError(self._find_cycle(remaining))
        return order

    def _find_cycle(self, remaining: list[int]) -> list[str]:
        """A cycle among nodes Kahn could not emit.

        Each such node has an un-emitted predecessor, so walking back through them
        must revisit a node. The cycle is rotated to start at its lowest index.
        """
        v = next(i for i, count in enumerate(remaining) if count > 0)
        seen: dict[int, int] = {}
        path: list[int] = []
        while v not in seen:
            seen[v] = len(path)
            path.append(v)
            v = min(p for p in self.preds[v] if remaining[p] > 0)
        loop = path[seen[v] :][::-1]  # walked backwards; edges run the other way
        first = loop.index(min(loop))
        loop = loop[first:] + loop[:first]
        return [self.ids[i] for i in loop + loop[:1]]

    def _ancestor_sets(self) -> list[int]:
        ancestors = [0] * len(self.ids)
        for v in self.topo_order():
            bits = 0
            for p in self.preds[v]:
                bits |= ancestors[p] | (1 << p)
            ancestors[v] = bits
        return ancestors
