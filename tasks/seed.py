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
import struct
from collections.abc import Sequence
from typing import TypeVar

__all__ = ["EXAMPLE_SEED", "Draw", "public_seed", "text_seed"]

T = TypeVar("T")

EXAMPLE_SEED = 0
"""The seed of the public example instance every package shows."""

_SEED_BYTES = 8
_PUBLIC_BIT = 1 << 63
_SPAN = 2 ** (8 * _SEED_BYTES)
_WORD = struct.Struct(">Q")
"""A counter's 8 big-endian bytes, and a block's first 8 read as a number (``_SEED_BYTES``)."""


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
    """Choices drawn from a seed: the same seed gives the same sequence on every machine.

    The ``n``-th value is the first 8 bytes of ``sha256(seed bytes + n as 8 bytes)``, big
    endian. The key's hash state is kept and copied per value (the same digest as hashing
    the whole message, without hashing the key again), and :meth:`shuffled`, where a
    family's generator spends most of its draws, runs the loop of :meth:`below` inline."""

    __slots__ = ("_keyed", "_counter")

    def __init__(self, seed: int) -> None:
        self._keyed = hashlib.sha256((seed % _SPAN).to_bytes(_SEED_BYTES, "big"))
        self._counter = 0

    def _next(self) -> int:
        block = self._keyed.copy()
        block.update(_WORD.pack(self._counter))
        self._counter += 1
        value: int = _WORD.unpack_from(block.digest())[0]
        return value

    def below(self, n: int) -> int:
        """A whole number in ``[0, n)``, without modulo bias (rejection sampling)."""
        if n <= 0:
            raise ValueError("below() needs n > 0")
        limit = _SPAN // n * n
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
        """A new list: ``items`` in a drawn order (Fisher–Yates, ``j = self.below(i + 1)``)."""
        out = list(items)
        keyed, counter, pack, unpack = self._keyed, self._counter, _WORD.pack, _WORD.unpack_from
        for i in range(len(out) - 1, 0, -1):
            n = i + 1
            limit = _SPAN // n * n
            while True:
                block = keyed.copy()
                block.update(pack(counter))
                counter += 1
                value = unpack(block.digest())[0]
                if value < limit:
                    break
            j = value % n
            out[i], out[j] = out[j], out[i]
        self._counter = counter
        return out
