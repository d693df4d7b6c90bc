"""The action catalogue: which actions each tool type offers, and what each action outputs.

A task lists its subnets with a ``type`` (``ToolInfo.type``); a plan node names a
``subnet`` and an ``action``. The node is admissible only when the subnet's type
offers the action. ``echo`` is a development action (dry runs, tests): every tool
provider has it, but no tool type offers it, so no plan for a task may use it.

Every action declares its outputs: ``text`` always, ``artifacts.code`` for some,
and the ``artifacts.metadata`` keys it may fill (``None``: any key, for ``echo``).
A DataRef into a node's output must name a declared output (seed 002: a reference
names an output the source op actually produces).

Two actions shape the flow instead of computing (docs/execution.md, frames):
``split`` is a *generator*: it yields one output (a frame) per item, and the
nodes that reference it run once per frame; ``collect`` *gathers*: it runs once,
after every frame, on its params resolved frame by frame, in frame order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["ACTIONS", "TOOL_TYPES", "ActionSpec", "admission_error", "is_generator", "undeclared_output"]


@dataclass(frozen=True, slots=True)
class ActionSpec:
    """One action: whether it fills ``artifacts.code``, which metadata keys it may set,
    and whether it yields frames (``generator``) or joins them (``gathers``)."""

    name: str
    code: bool = False
    metadata: frozenset[str] | None = frozenset()
    generator: bool = False
    gathers: bool = False

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
    name: str, *, code: bool = False, metadata: str | None = "", generator: bool = False, gathers: bool = False
) -> ActionSpec:
    return ActionSpec(name, code, None if metadata is None else frozenset(metadata.split()), generator, gathers)


ACTIONS: Mapping[str, ActionSpec] = {
    spec.name: spec
    for spec in (
        _spec("echo", code=True, metadata=None),
        _spec("calculator", metadata="value expression"),
        _spec("json_transform", metadata="result"),
        _spec("csv_to_json", metadata="columns result"),
        _spec("json_to_csv", metadata="rows columns"),
        _spec("split", metadata="item index frames", generator=True),
        _spec("collect", metadata="items count", gathers=True),
        _spec("text_transform", code=True, metadata="replacements matches lines count language"),
        _spec("search", metadata="hits"),
        _spec("python_exec", code=True, metadata="returncode"),
        _spec("llm", metadata="model usage"),
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
