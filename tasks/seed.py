"""The deterministic choices a family's generator makes from a seed.

A validator draws each execution's instance from a seed made of its secret, the block
and the task (``validator.sampling.instance_seed``): it can replay and audit its own
scores, and two validators given the same seed make the same instance. :class:`Draw`
is sha256 in counter mode rather than :mod:`random`, whose ``shuffle`` and ``sample``
algorithms are not promised to stay the same across Python versions; an instance must
be bit-identical everywhere.
"""

from __future__ import annotations

import builtins
import hashlib
from collections.abc import Sequence
from typing import TypeVar

__all__ = ["EXAMPLE_SEED", "Draw", "public_seed", "text_seed"]

T = TypeVar("T")

EXAMPLE_SEED = 0
"""The seed of the public example instance every package shows."""

_SEED_BYTES = 8
_PUBLIC_BIT = 1 << 63


def public_seed(task_id: str, index: int) -> int:
    """The seed of a package's public example ``index`` (``0`` is :data:`EXAMPLE_SEED`).

    The others have the top bit of 64 set; a validator's instance seeds are 63 bits
    (``validator.sampling.instance_seed``), so no public example is ever scored."""
    if index == 0:
        return EXAMPLE_SEED
    return _PUBLIC_BIT | (text_seed(f"dagnet public example:{task_id}:{index}") & (_PUBLIC_BIT - 1))


def text_seed(text: str) -> int:
    """A seed named by a text (a family's fixed profile is drawn from its id)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:_SEED_BYTES], "big")


class Draw:
    """Choices drawn from a seed: the same seed gives the same sequence on every machine."""

    __slots__ = ("_key", "_counter")

    def __init__(self, seed: int) -> None:
        self._key = (seed % 2 ** (8 * _SEED_BYTES)).to_bytes(_SEED_BYTES, "big")
        self._counter = 0

    def _next(self) -> int:
        block = hashlib.sha256(self._key + self._counter.to_bytes(8, "big")).digest()
        self._counter += 1
        return int.from_bytes(block[:_SEED_BYTES], "big")

    def below(self, n: int) -> int:
        """A whole number in ``[0, n)``, without modulo bias (rejection sampling)."""
        if n <= 0:
            raise ValueError("below() needs n > 0")
        limit = 2 ** (8 * _SEED_BYTES) // n * n
        while True:
            value = self._next()
            if value < limit:
                return value % n

    def int(self, low: int, high: int) -> int:
        """A whole number in ``[low, high]``."""
        return low + self.below(high - low + 1)

    def choice(self, items: Sequence[T]) -> T:
        return items[self.below(len(items))]

    def sample(self, items: Sequence[T], k: builtins.int) -> list[T]:  # `int` here is Draw.int
        """``k`` distinct items, in drawn order."""
        return self.shuffled(items)[:k]

    def shuffled(self, items: Sequence[T]) -> list[T]:
        """A new list: ``items`` in a drawn order (Fisher–Yates)."""
        out = list(items)
        for i in range(len(out) - 1, 0, -1):
            j = self.below(i + 1)
            out[i], out[j] = out[j], out[i]
        return out
