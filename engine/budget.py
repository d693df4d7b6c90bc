"""Spending against a run's budget ceiling while it runs (the ceiling itself is decided
in :mod:`engine.evaluate`)."""

from __future__ import annotations

__all__ = ["_Budget"]


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
