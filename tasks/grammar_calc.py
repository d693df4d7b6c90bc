"""The compute productions of the family grammar: jobs with drawn formulas over two to
four whole-number inputs, reported as JSON (``agent``).

A formula is a small expression tree (``+``, ``-``, ``×`` over the inputs), optionally
divided by one input and rounded to one to three decimals, so every value is exact. A
later formula may build on an earlier one (``net`` = ``gross`` minus an input): its
calculator step then reads the earlier step, so how the steps are wired is drawn too.
The family is one calculator step per formula and a JSON report on a text subnet. A
formula's neighbours are the trees one change away: another operator at one node, the
operands of a subtraction swapped, another input (or earlier figure) at one leaf or as
the divisor, another number of decimals, or one leaf alone.

:func:`draw_shapes` and :func:`evaluate` are the formulas' grammar on their own: the
retrieval productions (:mod:`tasks.grammar_lookup`) draw formulas over figures read from
documents with them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Union

from protocol.dataref import INPUT, ref

from .agent_families import _checklist, tidy
from .family import Family, Instance
from .grammar import Neighbour, Production
from .profiles import make_family, step
from .seed import Draw

__all__ = [
    "Shape",
    "draw_job",
    "draw_shapes",
    "evaluate",
    "expression",
    "formula_neighbours",
    "render",
    "value",
    "wording",
]

Tree = Union[str, tuple[str, "Tree", "Tree"]]
"""An input's name, or ``(operator, left, right)``."""

_OPS = {"+": "plus", "-": "minus", "*": "times"}
_NAMES = ("width", "height", "count", "price", "hours", "rate", "weight", "days", "items", "crates", "seats", "rounds")
_KEYS = ("total", "gross", "net", "per_unit", "share", "score", "margin", "index", "load", "output")
_RANGES = ((1, 20), (2, 99), (10, 500), (100, 900))


def value(tree: Tree, params: dict[str, Any]) -> Any:
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


def _evaluated(shape: Shape, params: dict[str, Any]) -> Any:
    tree, divisor, digits = shape
    if divisor is None:
        return value(tree, params)
    return round(value(tree, params) / params[divisor], digits)


def expression(shape: Shape) -> str:
    """The calculator's expression over ``{name}`` placeholders."""
    tree, divisor, digits = shape
    return render(tree) if divisor is None else f"round({render(tree, False)} / {{{divisor}}}, {digits})"


def wording(key: str, shape: Shape) -> str:
    tree, divisor, digits = shape
    if divisor is None:
        return f"`{key}`: {_words(tree)}"
    return f"`{key}`: {_words(tree, False)} divided by `{divisor}`, rounded to {digits} decimal{'s' * (digits > 1)}"


def evaluate(shapes: dict[str, Shape], params: dict[str, Any]) -> dict[str, Any]:
    """Each formula's value, in order; a later formula reads the earlier ones by key."""
    known = dict(params)
    for key, shape in shapes.items():
        known[key] = tidy(_evaluated(shape, known))
    return {key: known[key] for key in shapes}


def _tree(draw: Draw, leaves: list[str], ops: str = "+-*") -> Tree:
    if len(leaves) == 1:
        return leaves[0]
    cut = draw.int(1, len(leaves) - 1)
    return (draw.choice(ops), _tree(draw, leaves[:cut], ops), _tree(draw, leaves[cut:], ops))


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


def draw_shapes(
    draw: Draw, names: list[str], keys: tuple[str, ...], wanted: int, ops: str = "+-*", divided: bool = True
) -> dict[str, Shape]:
    """``wanted`` different formulas over ``names`` under keys drawn from ``keys``; the first
    uses every name, a later one may be an earlier whole-number figure and a name (a chain)."""
    shapes: dict[str, Shape] = {}
    probe = dict(zip(names, (7, 11, 13, 17)))
    for key in draw.shuffled(keys):
        leaves = draw.sample(names, draw.int(2, min(3, len(names)))) if shapes else draw.shuffled(names)
        whole = [k for k, (_, divisor, _) in shapes.items() if divisor is None]
        chained = bool(whole) and draw.below(2) == 0
        if chained:  # one earlier figure and one name, undivided: deeper chains run past the reference's search
            leaves = [draw.choice(names), draw.choice(whole)]
        divisor = draw.choice(names) if divided and not chained and draw.below(3) == 0 else None
        shape = (_tree(draw, draw.shuffled(leaves), ops), divisor, draw.int(1, 3))
        try:
            seen = evaluate({**shapes, key: shape}, probe)
        except ArithmeticError:
            continue
        if all(seen[key] != seen[k] for k in shapes):
            shapes[key] = shape  # a formula that repeats an earlier one is drawn again, under another key
        if len(shapes) == wanted:
            break
    return shapes


def formula_neighbours(
    shapes: dict[str, Shape], names: list[str], params: Callable[[Instance], dict[str, Any]]
) -> dict[str, dict[str, Neighbour]]:
    """Per key, what the formulas one change away give (``params``: an instance's leaves)."""
    found: dict[str, dict[str, Neighbour]] = {}
    for key, shape in shapes.items():
        earlier = list(shapes)[: list(shapes).index(key)]
        leaves = [*names, *earlier]
        others = [*_neighbour_shapes(shape, leaves), *((leaf, None, 1) for leaf in leaves)]
        found[key] = {f"{key}~{n}": _changed(shapes, key, other, params) for n, other in enumerate(others)}
    return found


def _changed(shapes: dict[str, Shape], key: str, other: Shape, params: Callable[[Instance], dict[str, Any]]):
    def answer(instance: Instance) -> Any:
        return evaluate({**shapes, key: other}, params(instance))[key]

    return answer


def _family(index: int, names: list[str], ranges: dict[str, tuple[int, int]], shapes: dict[str, Shape]) -> Family:
    def generate(draw: Draw) -> tuple[dict[str, Any], dict[str, Any]]:
        params = {name: draw.int(*ranges[name]) for name in names}
        return params, {"goal_checklist": _checklist(evaluate(shapes, params))}

    refs = {name: ref(INPUT, name) for name in names} | {key: ref(f"calc_{key}", "text") for key in shapes}
    steps = [
        step(f"calc_{key}", "calculator", expression=expression(shape).format(**refs)) for key, shape in shapes.items()
    ]
    report = "{{" + ", ".join(f'"{key}": {{{key}}}' for key in shapes) + "}}"
    steps.append(
        step(
            "report",
            "text_transform",
            op="template",
            text=report,
            values={key: ref(f"calc_{key}", "text") for key in shapes},
        )
    )
    given = ", ".join(f"`{n}`" for n in names)
    asked = "; ".join(wording(key, shape) for key, shape in shapes.items())
    description = f"Given the whole numbers {given}, report JSON with {asked}."
    schema = {"type": "object", "required": list(names), "properties": {name: {"type": "integer"} for name in names}}
    return make_family(index, "agent_drawn", "agent", description, schema, steps, generate)


def draw_job(draw: Draw, index: int) -> Production:
    """Two to four inputs and two to four different formulas over them (three over four
    inputs: four formulas over four inputs run past the reference planner's search
    budget), independent or one building on another; the first uses every input."""
    names = draw.sample(_NAMES, draw.int(2, 4))
    ranges = {name: draw.choice(_RANGES) for name in names}
    shapes = draw_shapes(draw, names, _KEYS, draw.int(2, 4 if len(names) < 4 else 3))
    family = _family(index, names, ranges, shapes)
    return Production(family, formula_neighbours(shapes, names, lambda instance: instance.inputs))
