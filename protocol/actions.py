"""The action catalogue: which actions each tool type offers, and what each action outputs.

A task lists its subnets with a ``type`` (``ToolInfo.type``); a plan node names a
``subnet`` and an ``action``. The node is admissible only when the subnet's type
offers the action. ``echo`` is a development action (dry runs, tests): every tool
provider has it, but no tool type offers it, so no plan for a task may use it.

Every action declares its outputs: ``text`` always, ``artifacts.code`` for some,
and the ``artifacts.metadata`` keys it may fill (``None``: any key, for ``echo``).
A DataRef into a node's output must name a declared output (seed 002: a reference
names an output the source op actually produces).

Each metadata key also has a :class:`Shape`: a single value, a list (of what), an object
with named fields (a search hit: ``doc``, ``title``, ``sentence``, ``score``), or
anything (a JSON result). The plan builder checks a reference below a key against its
shape as it is written (``hits["hits"][0]["text"]`` fails: a hit has no ``text``); the
validator's plan check reads the key only, and a path below it that the output does
not have blocks the node at run time (``missing_field``).

Two actions shape the flow instead of computing (docs/execution.md, frames):
``split`` is a *generator*: it yields one output (a frame) per item, and the
nodes that reference it run once per frame; ``collect`` *gathers*: it runs once,
after every frame, on its params resolved frame by frame, in frame order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "ACTIONS",
    "ANY",
    "SCALAR",
    "TOOL_TYPES",
    "ActionSpec",
    "Shape",
    "admission_error",
    "is_generator",
    "undeclared_output",
]


@dataclass(frozen=True, slots=True)
class Shape:
    """What one metadata value holds, as deep as a reference may index it."""

    kind: Literal["any", "scalar", "list", "object"]
    items: Shape | None = None
    """A list's items."""
    fields: Mapping[str, Shape] = field(default_factory=dict)
    """An object's fields."""
    noun: str = "an object"
    """What one such value is called in messages (``a hit``)."""

    def problem(self, name: str, path: tuple[str, ...]) -> str | None:
        """Why ``path`` below this value (called ``name``) leads nowhere, or ``None``."""
        if not path or self.kind == "any":
            return None
        step, rest = path[0], path[1:]
        if self.kind == "scalar":
            return f"{name} is a single value: it has no {step!r}"
        if self.kind == "list":
            if not step.isdigit():
                return f"{name} is a list: index it with a number, not {step!r}"
            assert self.items is not None
            return self.items.problem(f"{name}[{step}]", rest)
        if step not in self.fields:
            return f"{name} is {self.noun}, which has no field {step!r} (fields: {', '.join(self.fields)})"
        return self.fields[step].problem(f"{name}.{step}", rest)


ANY = Shape("any")
SCALAR = Shape("scalar")
_SCALARS = Shape("list", SCALAR)
_ANYTHINGS = Shape("list", ANY)
HIT = Shape("object", fields={"doc": SCALAR, "title": SCALAR, "sentence": SCALAR, "score": SCALAR}, noun="a hit")
"""One search hit (``subnets/retrieval.py``): the document, its title, the matching
sentence and its BM25 score."""


@dataclass(frozen=True, slots=True)
class ActionSpec:
    """One action: whether it fills ``artifacts.code``, which metadata keys it may set and
    the shape of each, and whether it yields frames (``generator``) or joins them (``gathers``)."""

    name: str
    code: bool = False
    metadata: frozenset[str] | None = frozenset()
    generator: bool = False
    gathers: bool = False
    shapes: Mapping[str, Shape] = field(default_factory=dict)
    """Metadata key → its shape; a key without one may hold anything."""

    def path_problem(self, path: tuple[str, ...]) -> str | None:
        """Why ``path`` (after ``output``) is not something this action produces, or ``None``.

        Stricter than :meth:`declares`: it also follows the path into a metadata value's shape.
        """
        if not self.declares(path):
            return f"{self.name} does not output {'.'.join(path)}"
        if path[:2] != ("artifacts", "metadata") or len(path) < 4:
            return None
        key = path[2]
        return self.shapes.get(key, ANY).problem(key, path[3:])

    def declares(self, path: tuple[str, ...]) -> bool:
        """Whether ``path`` (after ``output``) names something this action may produce."""
        head, rest = path[0], path[1:]
        if head == "text":
            return not rest
        if head != "artifacts":
            return False
        if not rest:
            return True
        if rest[0] == "code":
            return self.code and len(rest) == 1
        if rest[0] != "metadata":
            return False
        return len(rest) == 1 or self.metadata is None or rest[1] in self.metadata


def _spec(
    name: str,
    *,
    code: bool = False,
    metadata: Mapping[str, Shape] | None = None,
    generator: bool = False,
    gathers: bool = False,
    any_metadata: bool = False,
) -> ActionSpec:
    shapes = dict(metadata or {})
    keys = None if any_metadata else frozenset(shapes)
    return ActionSpec(name, code, keys, generator, gathers, shapes)


ACTIONS: Mapping[str, ActionSpec] = {
    spec.name: spec
    for spec in (
        _spec("echo", code=True, any_metadata=True),
        _spec("calculator", metadata={"value": SCALAR, "expression": SCALAR}),
        _spec("json_transform", metadata={"result": ANY}),
        _spec("csv_to_json", metadata={"columns": _SCALARS, "result": ANY}),
        _spec("json_to_csv", metadata={"rows": SCALAR, "columns": _SCALARS}),
        _spec("split", metadata={"item": ANY, "index": SCALAR, "frames": SCALAR}, generator=True),
        _spec("collect", metadata={"items": _ANYTHINGS, "count": SCALAR}, gathers=True),
        _spec(
            "text_transform",
            code=True,
            metadata={
                "replacements": SCALAR,
                "matches": _SCALARS,
                "lines": _SCALARS,
                "count": SCALAR,
                "language": SCALAR,
            },
        ),
        _spec("search", metadata={"hits": Shape("list", HIT)}),
        _spec("python_exec", code=True, metadata={"returncode": SCALAR}),
        _spec("llm", metadata={"model": SCALAR, "usage": ANY}),
    )
}
"""Every action a dagnet tool provider may run, by name."""

TOOL_TYPES: Mapping[str, frozenset[str]] = {
    "data": frozenset({"csv_to_json", "json_transform", "json_to_csv", "split", "collect"}),
    "text": frozenset({"text_transform"}),
    "retrieval": frozenset({"search"}),
    "math": frozenset({"calculator"}),
    "exec": frozenset({"python_exec"}),
    "model": frozenset({"llm"}),
}
"""Which actions a subnet of each type offers. ``echo`` is offered by none."""


def admission_error(action: str, subnet: str, subnet_type: str | None) -> str | None:
    """Why ``action`` may not run on ``subnet`` (of ``subnet_type``), or ``None`` if it may.

    ``subnet_type=None`` means the subnet's type is not known (a plan checked
    without a task): then only an unknown action is an error.
    """
    if action not in ACTIONS:
        return f"unknown action {action!r}"
    if subnet_type is None:
        return None
    offered = TOOL_TYPES.get(subnet_type, frozenset())
    if action not in offered:
        return f"action {action!r} is not offered by subnet {subnet} (type {subnet_type!r})"
    return None


def undeclared_output(action: str, path: tuple[str, ...]) -> bool:
    """Whether ``path`` (after ``output``) is outside what ``action`` declares it produces."""
    spec = ACTIONS.get(action)
    return spec is not None and not spec.declares(path)


def is_generator(action: str) -> bool:
    """Whether ``action`` yields frames rather than one output."""
    spec = ACTIONS.get(action)
    return spec is not None and spec.generator
