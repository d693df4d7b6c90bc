"""Numbers: ``calculator`` expressions over numeric leaves, found bottom up.

Leaves are numbers a program already has (numeric inputs, numbers read out of
retrieved sentences, values found for other keys) and a few small constants.
Expressions grow by size (the number of leaves), combined with ``+ - * /`` and ``**``
(an exponent that is a leaf); two expressions with the same value on every example are
one (observational equivalence), and an expression that is the same number in every
example is dropped unless it is a constant leaf (folding constants adds nothing). The
last level is met in the middle: for ``t = round(x op y, d)`` the ``y`` that ``x`` needs
is looked up by value in the sorted pool. A target is matched exactly, or after
``round`` to as many decimals as the targets show.
"""

from __future__ import annotations

import bisect
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from protocol.dataref import ref

from .world import Fragment, Program, World

__all__ = ["Leaf", "expressions"]

CONSTANTS = (1, 2, 10, 100)
_FULL_SIZE = 3
_MAX_POOL = 30_000
_MAX_MAGNITUDE = 1e100
_MATCHES_PER_PROBE = 40


@dataclass(frozen=True, slots=True)
class Leaf:
    """A number the program has: its text in an expression, and its value per example."""

    text: str
    values: tuple[float, ...]
    steps: int = 0


@dataclass(frozen=True, slots=True)
class _Expr:
    values: tuple[float, ...]
    text: str
    size: int
    op: str = ""
    """The outermost operator ("" for a leaf)."""


def _pow(a: float, b: float) -> float:
    if abs(b) > 64 or (abs(a) > 1 and b * math.log10(abs(a)) > 90) or (a == 0 and b < 0):
        raise OverflowError
    result = a**b
    if isinstance(result, complex):
        raise ValueError
    return result


_OPS: dict[str, tuple[Callable[[float, float], float], bool]] = {
    "+": (operator.add, True),
    "-": (operator.sub, False),
    "*": (operator.mul, True),
    "/": (operator.truediv, False),
    "max": (max, True),
    "min": (min, True),
}
_INVERTIBLE = ("+", "-", "*", "/")


def _tidy(value: float) -> float:
    """As the calculator reports a number: 12 significant digits."""
    return float(f"{value:.12g}")


def _decimals(value: Any) -> int:
    if isinstance(value, int):
        return 0
    text = repr(float(value))
    return len(text.partition(".")[2].rstrip("0")) if "e" not in text else 12


class _Targets:
    """Per key, the numbers wanted in every example, matched exactly or rounded."""

    def __init__(self, world: World, wanted: dict[str, tuple[float, ...]]) -> None:
        self.wanted = wanted
        self.mentions = {name: world.mentions(name) for name in wanted}
        self.fallback: dict[str, str] = {}
        self.digits = {name: _digits(world.decimals(name), values) for name, values in wanted.items()}
        self.exact = {tuple(float(v) for v in values): name for name, values in wanted.items()}
        self.found: dict[str, str] = {}

    def offer(self, expr: _Expr) -> None:
        name = self.exact.get(tuple(_tidy(v) for v in expr.values))
        if name is not None and name not in self.found:
            self._take(name, expr.text)
        for name, values in self.wanted.items():
            if name in self.found or self.digits[name] > 6:
                continue
            digits = self.digits[name]
            if all(_rounded(v, digits) == t for v, t in zip(expr.values, values)):
                self._take(name, f"round({expr.text})" if digits == 0 else f"round({expr.text}, {digits})")

    def _take(self, name: str, text: str) -> None:
        """A match; one that leaves out an input the description names for the key is
        only kept in case nothing better turns up."""
        if all(mention in text for mention in self.mentions.get(name, ())):
            self.found[name] = text
        else:
            self.fallback.setdefault(name, text)

    def done(self) -> bool:
        return len(self.found) == len(self.wanted)


def _digits(asked: int | None, values: tuple[float, ...]) -> int:
    """The decimals a target is rounded to: as the description asks, else as many as its values show."""
    shown = max(_decimals(v) for v in values)
    return asked if asked is not None and asked >= shown else shown


def _rounded(value: float, digits: int) -> float:
    return _tidy(round(value, digits))


def expressions(
    world: World,
    program: Program,
    leaves: Sequence[Leaf],
    wanted: dict[str, tuple[float, ...]],
    *,
    deep: bool = True,
    constants: Sequence[int] = CONSTANTS,
    fallback: dict[str, Fragment] | None = None,
) -> dict[str, Fragment]:
    """For each wanted key, a ``calculator`` step whose value matches it in every example
    and reads every input the description names for it (a match that does not is put in
    ``fallback``). Not ``deep``: expressions of two leaves only, a cheap round first."""
    targets = _Targets(world, wanted)
    pool = _grow(
        world,
        [*leaves, *(Leaf(str(c), (float(c),) * len(world.examples)) for c in constants)],
        targets,
        _FULL_SIZE if deep else 2,
    )
    if deep and not targets.done():
        _meet(world, pool, targets)

    def step(key: str, text: str) -> Fragment:
        made = program.add("calculator", {"expression": text})
        return Fragment(
            wanted[key],
            ref(made, "artifacts", "metadata", "value"),
            ref(made, "text"),
            1 + sum(leaf.steps for leaf in leaves if leaf.text in text),
        )

    if fallback is not None:
        for key, text in targets.fallback.items():
            if key not in targets.found and key not in fallback:
                fallback[key] = step(key, text)
    return {key: step(key, text) for key, text in targets.found.items()}


def _grow(world: World, leaves: Sequence[Leaf], targets: _Targets, full_size: int) -> list[_Expr]:
    """Every expression up to ``full_size`` leaves (and, deep, powers by a leaf and as much
    of the next size as the pool's bound allows), each value once."""
    count = len(world.examples)
    by_size: dict[int, list[_Expr]] = {1: [], 2: [], 3: [], 4: []}
    seen: set[tuple[float, ...]] = set()

    def keep(expr: _Expr, size: int) -> None:
        key = tuple(_tidy(v) for v in expr.values)
        if key in seen or (size > 1 and len(set(key)) == 1 and count > 1):
            return
        seen.add(key)
        by_size[size].append(expr)
        targets.offer(expr)

    for leaf in leaves:
        keep(_Expr(leaf.values, leaf.text, 1), 1)
    for size in range(2, full_size + 1):
        _level(world, by_size, size, keep, lambda: targets.done())
    if full_size >= _FULL_SIZE and not targets.done():
        exponents = [e for e in by_size[1] if len(set(e.values)) > 1]
        for a in [e for size in range(1, _FULL_SIZE + 1) for e in by_size[size]]:
            world.budget.check()
            for b in exponents:
                expr = _apply("**", a, b)
                if expr is not None:
                    keep(expr, _FULL_SIZE + 1)
        _level(world, by_size, _FULL_SIZE + 1, keep, lambda: targets.done() or len(seen) > _MAX_POOL)
    return [e for level in by_size.values() for e in level]


def _level(
    world: World,
    by_size: dict[int, list[_Expr]],
    size: int,
    keep: Callable[[_Expr, int], None],
    stop: Callable[[], bool],
) -> None:
    """Expressions of ``size`` leaves: two smaller ones combined, and the absolute value
    of those that go negative."""
    for left_size in range(size - 1, 0, -1):  # the larger part first: (a * b) / c before a / (c / b)
        for a in list(by_size[left_size]):
            world.budget.check()
            if stop():
                return
            for b in list(by_size[size - left_size]):
                for expr in _combine(a, b):
                    keep(expr, size)
    for expr in list(by_size[size]):
        if any(v < 0 for v in expr.values):
            keep(_Expr(tuple(abs(v) for v in expr.values), f"abs({expr.text})", size, "abs"), size)


def _combine(a: _Expr, b: _Expr) -> list[_Expr]:
    out = []
    for symbol, (_, commutative) in _OPS.items():
        if (commutative and a.text > b.text and a.size == b.size) or (symbol == "/" and b.op == "/"):
            continue  # a / (b / c) is written (a * c) / b, which rounds once
        expr = _apply(symbol, a, b)
        if expr is not None:
            out.append(expr)
    return out


def _apply(symbol: str, a: _Expr, b: _Expr) -> _Expr | None:
    fn = _pow if symbol == "**" else _OPS[symbol][0]
    try:
        values = tuple(fn(x, y) for x, y in zip(a.values, b.values))
    except (ZeroDivisionError, OverflowError, ValueError):
        return None
    if any(not math.isfinite(v) or abs(v) > _MAX_MAGNITUDE for v in values):
        return None
    text = f"{symbol}({a.text}, {b.text})" if symbol.isalpha() else f"({a.text} {symbol} {b.text})"
    return _Expr(values, text, a.size + b.size, symbol)


def _meet(world: World, pool: list[_Expr], targets: _Targets) -> None:
    """One more level: ``x op y`` with ``x`` small and ``y`` anywhere in the pool, ``y``
    looked up by the value it needs on the first example."""
    order = sorted(range(len(pool)), key=lambda i: pool[i].values[0])
    firsts = [pool[i].values[0] for i in order]
    small = [e for e in pool if e.size <= 2]
    for name, values in targets.wanted.items():
        if name in targets.found:
            continue
        half = 0.5 * 10 ** -targets.digits[name] if targets.digits[name] <= 6 else 1e-9 * max(1.0, abs(values[0]))
        low, high = values[0] - half, values[0] + half
        for x in small:
            world.budget.check()
            for symbol in _INVERTIBLE:
                for y_low, y_high, x_first in _needed(symbol, x.values[0], low, high):
                    start = bisect.bisect_left(firsts, y_low)
                    for i in order[start : start + _MATCHES_PER_PROBE]:
                        if pool[i].values[0] > y_high:
                            break
                        pair = (x, pool[i]) if x_first else (pool[i], x)
                        expr = _apply(symbol, *pair)
                        if expr is not None:
                            targets.offer(expr)
                    if name in targets.found:
                        break
                if name in targets.found:
                    break
            if name in targets.found:
                break


def _needed(symbol: str, x: float, low: float, high: float) -> list[tuple[float, float, bool]]:
    """The interval ``y`` must fall in for ``x op y`` (x first) and ``y op x`` to land in [low, high]."""
    out: list[tuple[float, float, bool]] = []
    if symbol == "+":
        out.append((low - x, high - x, True))
    elif symbol == "-":
        out += [(x - high, x - low, True), (low + x, high + x, False)]
    elif symbol == "*" and x != 0:
        a, b = low / x, high / x
        out.append((min(a, b), max(a, b), True))
    elif symbol == "/":
        if x != 0:
            a, b = low * x, high * x
            out.append((min(a, b), max(a, b), False))
        if low > 0 or high < 0:
            a, b = x / low, x / high
            out.append((min(a, b), max(a, b), True))
    return out
