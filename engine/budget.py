"""Spending against a run's budget ceiling while it runs (the ceiling itself is decided
in :mod:`engine.evaluate`), and a plan's allowance of work (:mod:`engine.owned`)."""

from __future__ import annotations

import threading

__all__ = ["Allowance", "_Budget"]


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

    __slots__ = ("cap", "worst", "spent", "_reserved", "_open", "closed")

    def __init__(self, cap: float, worst: float, closed: threading.Event | None = None) -> None:
        self.cap = cap
        self.worst = worst
        self.spent = 0.0
        self._reserved = 0.0
        self._open = 0  # reservations not yet settled
        self.closed = closed or threading.Event()

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
