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
    leaf: bool = False


def _pow(a: float, b: float) -> float:
    if abs(b) > 64 or (abs(a) > 1 and b * math.log10(abs(a)) > 90) or (a == 0 and b < 0):
        raise OverflowError
    result = a ** b
    if isinstance(result, complex):
        raise ValueError
    return result


_OPS: dict[str, tuple[Callable[[float, float], float], bool]] = {
    "+": (operator.add, True), "-": (operator.sub, False), "*": (operator.mul, True), "/": (operator.truediv, False),
}


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

    def __init__(self, wanted: dict[str, tuple[float, ...]]) -> None:
        self.wanted = wanted
        self.digits = {name: max(_decimals(v) for v in values) for name, values in wanted.items()}
        self.exact = {tuple(float(v) for v in values): name for name, values in wanted.items()}
        self.found: dict[str, str] = {}

    def offer(self, expr: _Expr) -> None:
        name = self.exact.get(tuple(_tidy(v) for v in expr.values))
        if name is not None and name not in self.found:
            self.found[name] = expr.text
        for name, values in self.wanted.items():
            if name in self.found or self.digits[name] > 6:
                continue
            digits = self.digits[name]
            if all(_rounded(v, digits) == t for v, t in zip(expr.values, values)):
                self.found[name] = f"round({expr.text})" if digits == 0 else f"round({expr.text}, {digits})"

    def done(self) -> bool:
        return len(self.found) == len(self.wanted)


def _rounded(value: float, digits: int) -> float:
    return _tidy(round(value, digits))


def expressions(
    world: World, program: Program, leaves: Sequence[Leaf], wanted: dict[str, tuple[float, ...]], *, deep: bool = True,
) -> dict[str, Fragment]:
    """For each wanted key, a ``calculator`` step whose value matches it in every example.
    Not ``deep``: expressions of two leaves only, a cheap round before the full search."""
    targets = _Targets(wanted)
    pool = _grow(world, leaves, targets, _FULL_SIZE if deep else 2)
    if deep and not targets.done():
        _meet(world, pool, targets)
    found = {}
    for name, text in targets.found.items():
        step = program.add("calculator", {"expression": text})
        found[name] = Fragment(wanted[name], ref(step, "artifacts", "metadata", "value"), ref(step, "text"),
                               1 + sum(leaf.steps for leaf in leaves if leaf.text in text))
    return found


def _grow(world: World, leaves: Sequence[Leaf], targets: _Targets, full_size: int) -> list[_Expr]:
    count = len(world.examples)
    base = [_Expr(leaf.values, leaf.text, 1, True) for leaf in leaves]
    base += [_Expr((float(c),) * count, str(c), 1, True) for c in CONSTANTS]
    by_size: dict[int, list[_Expr]] = {1: []}
    seen: set[tuple[float, ...]] = set()
    for expr in base:
        key = tuple(_tidy(v) for v in expr.values)
        if key not in seen:
            seen.add(key)
            by_size[1].append(expr)
            targets.offer(expr)
    for size in range(2, full_size + 1):
        by_size[size] = []
        for left_size in range(1, size):
            for a in by_size[left_size]:
                world.budget.check()
                for b in by_size[size - left_size]:
                    for expr in _combine(a, b):
                        key = tuple(_tidy(v) for v in expr.values)
                        if key in seen or (len(set(key)) == 1 and count > 1):
                            continue
                        seen.add(key)
                        by_size[size].append(expr)
                        targets.offer(expr)
                if len(seen) > _MAX_POOL or targets.done():
                    return [e for level in by_size.values() for e in level]
    pool = [e for level in by_size.values() for e in level]
    if full_size < _FULL_SIZE:
        return pool
    exponents = [e for e in by_size[1] if not all(v == e.values[0] for v in e.values)]
    for a in list(pool):
        world.budget.check()
        for b in exponents:
            expr = _apply("**", a, b)
            if expr is not None and tuple(_tidy(v) for v in expr.values) not in seen:
                seen.add(tuple(_tidy(v) for v in expr.values))
                pool.append(expr)
                targets.offer(expr)
    return pool


def _combine(a: _Expr, b: _Expr) -> list[_Expr]:
    out = []
    for symbol, (_, commutative) in _OPS.items():
        if commutative and a.text > b.text and a.size == b.size:
            continue
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
    return _Expr(values, f"({a.text} {symbol} {b.text})", a.size + b.size)


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
            for symbol, (fn, _) in _OPS.items():
                for y_low, y_high, x_first in _needed(symbol, x.values[0], low, high):
                    start = bisect.bisect_left(firsts, y_low)
                    for i in order[start:start + _MATCHES_PER_PROBE]:
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
