"""Which plan nodes may start now: dependencies, parallelism, shared resources.

A :class:`Scheduler` is :class:`graphlib.TopologicalSorter` with resource rules
added, over integer node indices: ``prepare()``, then repeatedly ``get_ready()``
and ``done(i)`` while ``is_active()``. It has no clock and no asyncio, so the
executor decides *when* things happen and this module decides only *what may*.

Rules (docs/execution.md, scheduling):

- A node becomes ready the moment all its edge-predecessors have settled,
  whatever their outcome; whether a failed ancestor blocks it is the executor's
  call (by DataRefs), never the scheduler's.
- At most ``max_parallel`` nodes run at once; two running nodes never share a
  ``touches`` resource; a node with ``parallel_safe=False`` runs alone.
- Ready nodes are handed out by topological position (whose ties are already
  broken by plan index). A ready node that conflicts with running ones stays
  queued with its position, so it keeps its place in line, and lower-priority
  nodes that do not conflict may start meanwhile (the batch picking of a resource-aware DAG scheduler).

Every node settles exactly once: by ``done(i)`` after ``get_ready`` handed it
out, or by ``remove(i)`` for a node that will never run. A removed node settles
as soon as it and all of its predecessors are settled, which keeps the
invariant the executor relies on: when a node is handed out, every ancestor
(not only every predecessor) has settled.

Frames (docs/execution.md, generator nodes) add nodes while the run goes on:
``add(preds, join)`` creates a node (a frame instance) whose predecessors are
given, and which the pending node ``join`` waits for. A node marked with
``join(i)`` is never handed out: like a removed node it settles as soon as all
of its predecessors have, and ``on_join(i)`` is called then. A join gains
predecessors only while one of its own predecessors is unsettled, so it cannot
settle before its last instance is added.

Cost is O(nodes + edges) plus heap operations; a node that waits for a
resource is parked under that resource and only looked at again when the
resource is released, never rescanned on every call.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

__all__ = ["Scheduler"]

# Node states.
_PENDING, _READY, _RUNNING, _SETTLED = 0, 1, 2, 3
# Marks of nodes that are never handed out.
_REMOVED, _JOIN = 1, 2


class Scheduler:
    """Dependency- and resource-driven ready sets over nodes ``0 .. n-1``.

    ``order`` is a topological order of all nodes (the dispatch priority; nodes
    added later come after all of them, in the order they were added);
    ``on_ready(i)`` is called once per node as it becomes ready, and
    ``on_join(i)`` once per join as it settles, if given.
    """

    __slots__ = (
        "_succs",
        "_npred",
        "_pos",
        "_order",
        "_touches",
        "_solo",
        "_max_parallel",
        "_on_ready",
        "_on_join",
        "_state",
        "_removed",
        "_heap",
        "_held",
        "_waiting",
        "_solo_waiting",
        "_running",
        "_solo_running",
        "_nsettled",
        "_prepared",
        "_nfixed",
        "_copied",
    )

    def __init__(
        self,
        preds: Sequence[Sequence[int]],
        succs: Sequence[Sequence[int]],
        order: Sequence[int],
        *,
        max_parallel: int,
        touches: Sequence[Sequence[str]] | None = None,
        parallel_safe: Sequence[bool] | None = None,
        on_ready: Callable[[int], None] | None = None,
        on_join: Callable[[int], None] | None = None,
    ) -> None:
        n = len(preds)
        if len(order) != n or len(succs) != n:
            raise ValueError("preds, succs and order must cover the same nodes")
        if max_parallel < 1:
            raise ValueError("max_parallel must be at least 1")
        # The caller's successor lists are shared until add() must extend one (_copied).
        self._succs = list(succs)
        self._nfixed = n
        self._copied: set[int] = set()
        # _npred[i] counts i's predecessors that have not settled; i is ready at zero.
        self._npred = [len(p) for p in preds]
        self._order = list(order)
        self._pos = [0] * n
        for pos, i in enumerate(self._order):
            self._pos[i] = pos
        # Only nodes that can conflict carry resources; None keeps the fast path cheap.
        self._touches: list[tuple[str, ...]] | None = None
        if touches is not None and any(touches):
            self._touches = [tuple(dict.fromkeys(t)) for t in touches]
        self._solo: list[bool] | None = None
        if parallel_safe is not None and not all(parallel_safe):
            self._solo = [not safe for safe in parallel_safe]
        self._max_parallel = max_parallel
        self._on_ready = on_ready
        self._on_join = on_join
        self._state = bytearray(n)  # _PENDING
        self._removed = bytearray(n)  # 0, _REMOVED or _JOIN
        self._heap: list[int] = []  # topological positions of queued ready nodes
        self._held: set[str] = set()  # resources touched by running nodes
        self._waiting: dict[str, list[int]] = {}  # resource -> parked positions
        self._solo_waiting: list[int] = []  # parked positions of solo nodes
        self._running = 0
        self._solo_running = False
        self._nsettled = 0
        self._prepared = False

    # -- the graphlib-shaped interface -------------------------------------------

    def prepare(self) -> None:
        """Queue the roots. Call once, after any :meth:`remove` of nodes known upfront."""
        if self._prepared:
            raise ValueError("prepare() was already called")
        self._prepared = True
        # Collect roots first: releasing a removed root settles its removed successors.
        for i in [i for i in self._order if self._npred[i] == 0]:
            self._release(i)

    def get_ready(self) -> list[int]:
        """Nodes that may be dispatched now, in priority order; they count as running."""
        if not self._prepared:
            raise ValueError("prepare() must be called first")
        if self._solo_running:
            return []
        heap, state, order = self._heap, self._state, self._order
        touches, solo = self._touches, self._solo
        out: list[int] = []
        while heap and self._running < self._max_parallel:
            pos = heapq.heappop(heap)
            i = order[pos]
            if state[i] != _READY:
                continue  # removed while queued
            if solo is not None and solo[i]:
                if self._running:
                    self._solo_waiting.append(pos)
                    continue
                self._solo_running = True
            elif touches is not None and self._park_if_busy(i, pos):
                continue
            state[i] = _RUNNING
            self._running += 1
            if touches is not None:
                self._held.update(touches[i])
            out.append(i)
            if self._solo_running:
                break
        return out

    def done(self, i: int) -> None:
        """Settle a node that :meth:`get_ready` handed out (success or not)."""
        if self._state[i] != _RUNNING:
            raise ValueError(self._not_handed_out(i))
        self._running -= 1
        if self._touches is not None:
            self._free(self._touches[i])
        if self._solo_running and self._solo is not None and self._solo[i]:
            self._solo_running = False
        if self._running == 0 and self._solo_waiting:
            self._requeue(self._solo_waiting)
        self._settle(i)

    def remove(self, i: int) -> None:
        """Settle a node that will never run (blocked, aborted).

        A queued node settles at once; a pending one as soon as its predecessors
        have settled. Removing a running or settled node is an error.
        """
        self._mark(i, _REMOVED, "remove")
        if self._state[i] == _READY:
            self._settle(i)  # its heap entry goes stale and is skipped

    def join(self, i: int) -> None:
        """Make pending node ``i`` a join: never handed out, settled (and reported to
        ``on_join``) as soon as all its predecessors have settled. Call before :meth:`prepare`."""
        if self._prepared:
            raise ValueError("join() must be called before prepare()")
        self._mark(i, _JOIN, "join")

    def add(self, preds: Sequence[int], join: int, *, touches: Sequence[str] = (), parallel_safe: bool = True) -> int:
        """Add a node after ``preds`` and before the join ``join``; returns its index.

        Settled predecessors count as settled; the node is queued at once (and
        ``on_ready`` called) when they all are. ``join`` must not have settled yet.
        """
        if self._removed[join] != _JOIN or self._state[join] != _PENDING:
            raise ValueError(f"node {join} is not a pending join")
        new = len(self._state)
        self._succs.append([join])
        self._npred[join] += 1
        self._npred.append(0)
        self._state.append(_PENDING)
        self._removed.append(0)
        self._pos.append(len(self._order))
        self._order.append(new)
        if self._touches is not None:
            self._touches.append(tuple(dict.fromkeys(touches)))
        elif touches:
            self._touches = [()] * new + [tuple(dict.fromkeys(touches))]
        if self._solo is not None:
            self._solo.append(not parallel_safe)
        elif not parallel_safe:
            self._solo = [False] * new + [True]
        for p in dict.fromkeys(preds):
            if self._state[p] != _SETTLED:
                self._npred[new] += 1
                self._own_succs(p).append(new)
        if self._npred[new] == 0:
            self._release(new)
        return new

    def is_active(self) -> bool:
        """Whether any node has not settled yet."""
        return self._nsettled < len(self._state)

    # -- internals ------------------------------------------------------------------

    def _mark(self, i: int, mark: int, verb: str) -> None:
        state = self._state[i]
        if state == _RUNNING:
            raise ValueError(f"node {i} is running: settle it with done(), not {verb}()")
        if self._removed[i]:
            raise ValueError(f"node {i} was already {'removed' if self._removed[i] == _REMOVED else 'made a join'}")
        if state == _SETTLED:
            raise ValueError(f"node {i} was already marked done")
        self._removed[i] = mark

    def _own_succs(self, i: int) -> list[int]:
        """``i``'s successor list, copied first if it is still the caller's."""
        if i < self._nfixed and i not in self._copied:
            self._copied.add(i)
            self._succs[i] = list(self._succs[i])
        return self._succs[i]  # type: ignore[return-value]  # a list: copied just above, or earlier

    def _not_handed_out(self, i: int) -> str:
        """Which misuse ``done(i)`` is, for a node that is not running."""
        if self._removed[i]:
            how = "removed" if self._removed[i] == _REMOVED else "made a join"
            return f"node {i} was {how}: it is never handed out, so never done()"
        state = self._state[i]
        if state == _SETTLED:
            return f"node {i} was already marked done"
        if state == _READY:
            return f"node {i} is ready but get_ready() has not handed it out"
        return f"node {i} is not ready: its predecessors have not all settled"

    def _settle(self, i: int) -> None:
        """Mark ``i`` settled and release successors, cascading through removed ones."""
        npred, state, removed = self._npred, self._state, self._removed
        heap, pos, on_ready = self._heap, self._pos, self._on_ready
        stack: list[int] | None = None  # removed nodes and joins that settle in turn
        v = i
        while True:
            state[v] = _SETTLED
            self._nsettled += 1
            for s in self._succs[v]:
                npred[s] -= 1
                if npred[s] == 0:
                    if removed[s]:
                        if removed[s] == _JOIN and self._on_join is not None:
                            self._on_join(s)
                        if stack is None:
                            stack = [s]
                        else:
                            stack.append(s)
                        continue
                    state[s] = _READY
                    heapq.heappush(heap, pos[s])
                    if on_ready is not None:
                        on_ready(s)
            if not stack:
                return
            v = stack.pop()

    def _release(self, i: int) -> None:
        """Queue a node whose predecessors have all settled (a root, at prepare)."""
        if self._removed[i]:
            if self._removed[i] == _JOIN and self._on_join is not None:
                self._on_join(i)
            self._settle(i)
            return
        self._state[i] = _READY
        heapq.heappush(self._heap, self._pos[i])
        if self._on_ready is not None:
            self._on_ready(i)

    def _park_if_busy(self, i: int, pos: int) -> bool:
        """Park ``i`` under the first resource it needs that a running node holds."""
        held = self._held
        for resource in self._touches[i]:  # type: ignore[index]
            if resource in held:
                self._waiting.setdefault(resource, []).append(pos)
                return True
        return False

    def _free(self, resources: tuple[str, ...]) -> None:
        for resource in resources:
            self._held.discard(resource)
            parked = self._waiting.pop(resource, None)
            if parked:
                self._requeue(parked)

    def _requeue(self, parked: list[int]) -> None:
        heap = self._heap
        for pos in parked:
            heapq.heappush(heap, pos)
        parked.clear()
