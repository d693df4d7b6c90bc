"""A bench's progress as it runs: phases of counted steps, told to whoever listens.

A bench takes a :class:`Steps` and calls :meth:`Steps.phase` as each phase begins (with
the steps it holds) and :meth:`Steps.step` after each; the command line draws a progress
bar from what :class:`Steps` reports (``dagnet bench`` on a terminal), or nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
Report = Callable[[str, int, int], None]
"""``(phase, done, total)``: after a phase begins and after each of its steps."""


class Steps:
    def __init__(self, report: Report | None = None) -> None:
        self._report = report or (lambda phase, done, total: None)
        self.name, self.done, self.total = "", 0, 0

    def phase(self, name: str, total: int) -> None:
        self.name, self.done, self.total = name, 0, total
        self._report(name, 0, total)

    def step(self) -> None:
        self.done += 1
        self._report(self.name, self.done, self.total)

    def each(self, items: Iterable[T]) -> Iterator[T]:
        """``items``, with a step counted after each one is handled."""
        for item in items:
            yield item
            self.step()
