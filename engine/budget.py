"""Spending against a run's budget ceiling while it runs (the ceiling itself is decided
in :mod:`engine.evaluate`), and a plan's allowance of work (:mod:`engine.owned`)."""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

__all__ = ["Allowance", "Cores", "_Budget"]


class _Budget:
    """Spending against a ceiling; a dispatched node holds part of it until it settles.

    A node holds its estimate, or the dearest single attempt seen so far on its subnet
    when that is more (so an estimate of 0 hides nothing once the subnet has been paid,
    and one dear call does not make every cheap node after it look dear). A retry faces the ceiling
    exactly as a first attempt does. A run without a ceiling has no budget at all
    (None), so it pays nothing for one.
    """

    __slots__ = ("ceiling", "spent", "_reserved", "_open", "_dearest")

    def __init__(self, ceiling: float) -> None:
        self.ceiling = ceiling
        self.spent = 0.0
        self._reserved = 0.0
        self._open = 0  # reservations not yet released
        self._dearest: dict[str, float] = {}  # subnet -> the largest cost of one attempt on it so far

    def exhausted(self) -> bool:
        """Whether dispatching anything more could pass the ceiling."""
        return self.spent + self._reserved >= self.ceiling

    def retry_refused(self, held: float) -> bool:
        """Whether another attempt of a node holding ``held`` could pass the ceiling."""
        return self.spent + self._reserved - held >= self.ceiling

    def charge(self, cost: float, subnet: str) -> None:
        self.spent += cost
        if cost > self._dearest.get(subnet, 0.0):
            self._dearest[subnet] = cost

    def reserve(self, estimate: float, subnet: str) -> float:
        """Hold ``max(estimate, dearest attempt on subnet so far)``; returns what is held."""
        dearest = self._dearest.get(subnet, 0.0)
        held = estimate if estimate > dearest else dearest
        self._open += 1
        self._reserved += held
        return held

    def release(self, held: float) -> None:
        self._open -= 1
        # Back to exactly zero when nothing is open, so float drift never accumulates.
        self._reserved = self._reserved - held if self._open else 0.0


class Allowance:
    """Seconds of work a plan may use, where each piece of work reserves its worst case
    before it starts and is charged what it used when it ends (the rest refunded).

    A piece is admitted only while what is spent and reserved together is under the cap,
    so however many pieces run at once, what they use together is at most the cap plus
    one piece's worst case (as long as no piece uses more than its worst). ``closed`` set
    (a step's deadline) refuses every further piece. Called from one thread at a time,
    except ``closed``, which any thread may set.
    """

    __slots__ = ("cap", "worst", "spent", "_reserved", "_open", "closed", "_cores")

    def __init__(
        self, cap: float, worst: float, closed: threading.Event | None = None, cores: Cores | None = None
    ) -> None:
        self.cap = cap
        self.worst = worst
        self.spent = 0.0
        self._reserved = 0.0
        self._open = 0  # reservations not yet settled
        self.closed = closed or threading.Event()
        self._cores = cores

    def turn(self) -> AbstractContextManager[None]:
        """Wait for a core to do the next piece on, when the allowance shares :class:`Cores`."""
        return nullcontext() if self._cores is None else self._cores.turn(self.spent)

    def left(self) -> float:
        """What a piece admitted now may use before the cap (its tools stop there)."""
        return self.cap - self.spent - self._reserved

    def reserve(self) -> float | None:
        """Hold one piece's worst case, or ``None`` when the allowance cannot admit it."""
        if self.closed.is_set() or self.spent + self._reserved >= self.cap:
            return None
        return self.hold(self.worst)

    def hold(self, seconds: float) -> float:
        """Hold ``seconds`` whatever is left (work that must run, such as a cancellation)."""
        self._open += 1
        self._reserved += seconds
        return seconds

    def settle(self, held: float, used: float) -> None:
        """Charge ``used`` and give back the reservation ``held``."""
        self.spent += used
        self._open -= 1
        # Back to exactly zero when nothing is open, so float drift never accumulates.
        self._reserved = self._reserved - held if self._open else 0.0


class Cores:
    """The cores many plans' work shares, handed out least-used first.

    A piece of work waits until a core is free and no waiting piece belongs to a plan that
    has used less so far; so a plan that has done little (an honest one among sybils that
    spend their whole share) waits for at most one piece per core, however many plans
    there are. Pieces of plans that used the same go in the order they asked.
    """

    __slots__ = ("_free", "_waiting", "_tickets", "_changed")

    def __init__(self, cores: int) -> None:
        if cores < 1:
            raise ValueError("cores must be at least 1")
        self._free = cores
        self._waiting: list[tuple[float, int]] = []  # heap of (used so far, ticket)
        self._tickets = itertools.count()
        self._changed = threading.Condition()

    @contextmanager
    def turn(self, used: float) -> Iterator[None]:
        """Hold a core for one piece of work of a plan that has used ``used`` seconds."""
        with self._changed:
            ticket = (used, next(self._tickets))
            heapq.heappush(self._waiting, ticket)
            self._changed.wait_for(lambda: self._free > 0 and self._waiting[0] == ticket)
            heapq.heappop(self._waiting)
            self._free -= 1
            self._changed.notify_all()  # the next in line may have a core too
        try:
            yield
        finally:
            with self._changed:
                self._free += 1
                self._changed.notify_all()
