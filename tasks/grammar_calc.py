"""The compute productions of the family grammar: jobs with drawn formulas over two to
four whole-number inputs, reported as JSON (``agent``).

A formula is a small expression tree (``+``, ``-``, ``×`` over the inputs), optionally
divided by one input and rounded to one to three decimals, so every value is exact. The
family is built by the curated builder (``agent_families._job_family``): one calculator
step per formula, a JSON report on a text subnet. A formula's neighbours are the trees
one change away: another operator at one node, the operands of a subtraction swapped,
another input at one leaf or as the divisor, another number of decimals.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Union

from .agent_families import Formula, Job, _job_family, tidy
from .family import Instance
from .grammar import Production
from .seed import Draw

__all__ = ["draw_job", "render", "value"]

Tree = Union[str, tuple[str, "Tree", "Tree"]]
"""An input's name, or ``(operator, left, right)``."""

_OPS = {"+": "plus", "-": "minus", "*": "times"}
_NAMES = ("width", "height", "count", "price", "hours", "rate", "weight", "days", "items", "crates", "seats", "rounds")
_KEYS = ("total", "gross", "net", "per_unit", "share", "score", "margin", "index", "load", "output")
_RANGES = ((1, 20), (2, 99), (10, 500), (100, 900))


def value(tree: Tree, params: dict[str, int]) -> int:
    if isinstance(tree, str):
        return params[tree]
    op, left, right = tree
    a, b = value(left, params), value(right, params)
    return a + b if op == "+" else a - b if op == "-" else a * b


def render(tree: Tree, top: bool = True) -> str:
    """The expression over ``{name}`` placeholders, as the calculator reads it."""
    if isinstance(tree, str):
        return f"{{{tree}}}"
    text = f"{render(tree[1], False)} {tree[0]} {render(tree[2], False)}"
    return text if top else f"({text})"


def _words(tree: Tree, top: bool = True) -> str:
    if isinstance(tree, str):
        return f"`{tree}`"
    text = f"{_words(tree[1], False)} {_OPS[tree[0]]} {_words(tree[2], False)}"
    return text if top else f"({text})"


Shape = tuple[Tree, str | None, int]
"""A formula: its tree, the input it is divided by (or None) and the decimals then kept."""


def _formula(key: str, shape: Shape) -> Formula:
    tree, divisor, digits = shape
    if divisor is None:
        return Formula(key, render(tree), lambda p: value(tree, p))
    return Formula(key, f"round({render(tree, False)} / {{{divisor}}}, {digits})",
                   lambda p: round(value(tree, p) / p[divisor], digits))


def _wording(key: str, shape: Shape) -> str:
    tree, divisor, digits = shape
    if divisor is None:
        return f"`{key}`: {_words(tree)}"
    return f"`{key}`: {_words(tree, False)} divided by `{divisor}`, rounded to {digits} decimal{'s' * (digits > 1)}"


def _tree(draw: Draw, leaves: list[str]) -> Tree:
    if len(leaves) == 1:
        return leaves[0]
    cut = draw.int(1, len(leaves) - 1)
    return (draw.choice(tuple(_OPS)), _tree(draw, leaves[:cut]), _tree(draw, leaves[cut:]))


def _mutations(tree: Tree, names: list[str]) -> Iterator[Tree]:
    """Every tree one change away: an operator, a swapped subtraction, a leaf."""
    if isinstance(tree, str):
        yield from (name for name in names if name != tree)
        return
    op, left, right = tree
    yield from ((other, left, right) for other in _OPS if other != op)
    if op == "-":
        yield (op, right, left)
    yield from ((op, changed, right) for changed in _mutations(left, names))
    yield from ((op, left, changed) for changed in _mutations(right, names))


def _neighbour_shapes(shape: Shape, names: list[str]) -> Iterator[Shape]:
    tree, divisor, digits = shape
    yield from ((changed, divisor, digits) for changed in _mutations(tree, names))
    if divisor is not None:
        yield from ((tree, other, digits) for other in names if other != divisor)
        yield from ((tree, divisor, d) for d in (1, 2, 3) if d != digits)


def _job_value(shape: Shape):
    formula = _formula("_", shape)

    def answer(instance: Instance) -> Any:
        return tidy(formula.fn(instance.inputs))
    return answer


def draw_job(draw: Draw, index: int) -> Production:
    """Two to four inputs and two or three different formulas over them (independent
    calculations, as in the curated jobs); the first uses every input."""
    names = draw.sample(_NAMES, draw.int(2, 4))
    ranges = {name: draw.choice(_RANGES) for name in names}
    wanted = draw.int(2, 3)
    shapes: dict[str, Shape] = {}
    probe = dict(zip(names, (7, 11, 13, 17)))
    for key in draw.shuffled(_KEYS):
        leaves = draw.sample(names, draw.int(2, min(3, len(names)))) if shapes else draw.shuffled(names)
        divided = draw.below(3) == 0
        shape = (_tree(draw, leaves), draw.choice(names) if divided else None, draw.int(1, 3))
        if all(_formula(key, shape).fn(probe) != _formula(k, s).fn(probe) for k, s in shapes.items()):
            shapes[key] = shape  # a formula that repeats an earlier one is drawn again, under another key
        if len(shapes) == wanted:
            break
    given = ", ".join(f"`{n}`" for n in names)
    asked = "; ".join(_wording(key, shape) for key, shape in shapes.items())
    description = f"Given the whole numbers {given}, report JSON with {asked}."
    job = Job("drawn", description, ranges, tuple(_formula(key, shape) for key, shape in shapes.items()))
    family = _job_family(index, job)
    neighbours = {key: {f"{key}~{n}": _job_value(other) for n, other in enumerate(_neighbour_shapes(shape, names))}
                  for key, shape in shapes.items()}
    return Production(family, neighbours)
