"""Spending against a run's budget ceiling while it runs (the ceiling itself is decided
in :mod:`engine.evaluate`)."""

from __future__ import annotations

__all__ = ["_Budget"]


class _Budget:
    """Spending against a ceiling; a dispatched node holds part of it until it settles.

    A node holds its estimate, or the dearest single attempt seen so far in the run
    when that is more (so an estimate of 0 hides nothing). A retry faces the ceiling
    exactly as a first attempt does. A run without a ceiling has no budget at all
    (None), so it pays nothing for one.
    """

    __slots__ = ("ceiling", "spent", "_reserved", "_open", "_dearest")

    def __init__(self, ceiling: float) -> None:
        self.ceiling = ceiling
        self.spent = 0.0
        self._reserved = 0.0
        self._open = 0  # reservations not yet released
        self._dearest = 0.0  # the largest cost of one attempt so far

    def exhausted(self) -> bool:
        """Whether dispatching anything more could pass the ceiling."""
        return self.spent + self._reserved >= self.ceiling

    def retry_refused(self, held: float) -> bool:
        """Whether another attempt of a node holding ``held`` could pass the ceiling."""
        return self.spent + self._reserved - held >= self.ceiling

    def charge(self, cost: float) -> None:
        self.spent += cost
        if cost > self._dearest:
            self._dearest = cost

    def reserve(self, estimate: float) -> float:
        """Hold ``max(estimate, dearest attempt so far)``; returns what is held."""
        held = estimate if estimate > self._dearest else self._dearest
        self._open += 1
        self._reserved += held
        return held

    def release(self, held: float) -> None:
        self._open -= 1
        # Back to exactly zero when nothing is open, so float drift never accumulates.
        self._reserved = self._reserved - held if self._open else 0.0
