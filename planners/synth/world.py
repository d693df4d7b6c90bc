"""What the synthesiser searches against: a package's public examples, the budget the
search may spend, the program it writes step by step, and the reference tools that
check a finished program on every example.

A program is checked the way a validator runs it: each step's params resolved with
:mod:`protocol.dataref` against the example's inputs and the outputs of earlier
steps, held data substituted for the id only where a data or retrieval subnet reads
it (``search(collection=id)`` gets ``documents``, ``csv_to_json(table=id)`` gets
``csv``), then the reference tool of the action, in this process. ``python_exec`` is
never run here: untrusted text is not executed in the miner.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from protocol.actions import TOOL_TYPES
from protocol.dataref import INPUT, DataRefError, MissingField, compile_params, find_refs
from protocol.hints import PublicExample
from protocol.synapse import StepHint, TaskPackage
from subnets.base import ToolContext, ToolError, ToolRegistry
from subnets.registry import default_registry

from ..base import PlanningError

__all__ = [
    "HELD_READERS",
    "Budget",
    "Example",
    "Fragment",
    "Program",
    "World",
    "agrees",
    "canonical",
    "check_program",
    "fresh",
    "hold",
    "kind_of",
    "run_steps",
]

HELD_READERS: Mapping[str, tuple[str, str]] = {"search": ("collection", "documents"), "csv_to_json": ("table", "csv")}
"""The two actions that read held data: the param naming the id, and the param the data fills."""

_KIND_OF = {action: kind for kind, actions in TOOL_TYPES.items() for action in actions}
_STEP_TIMEOUT_S = 10.0


def kind_of(action: str) -> str:
    """The tool type that offers ``action``."""
    return _KIND_OF[action]


class Budget:
    """The search's allowance. Its measure is ``checks``: the search counts its steps, so
    the same package finds the same program (or none) on every machine, as a validator's
    reference plan must. A miner adds a CPU and a wall-clock cap (``math.inf``: none) so a
    loaded machine still answers before its planning deadline."""

    __slots__ = ("_checks_left", "_cpu_end", "_wall_end", "checks", "cpu_s")

    def __init__(self, checks: int, cpu_s: float = math.inf, wall_s: float = math.inf) -> None:
        self.checks = checks
        self.cpu_s = cpu_s
        self._checks_left = checks
        # An uncapped budget never reads a clock: its outcome cannot depend on the machine.
        self._cpu_end = time.thread_time() + cpu_s if math.isfinite(cpu_s) else math.inf
        self._wall_end = time.monotonic() + wall_s if math.isfinite(wall_s) else math.inf

    def spent(self) -> bool:
        if self._checks_left < 0:
            return True
        cpu = math.isfinite(self._cpu_end) and time.thread_time() > self._cpu_end
        return cpu or (math.isfinite(self._wall_end) and time.monotonic() > self._wall_end)

    def check(self) -> None:
        """Count one step; raise :class:`PlanningError` once the allowance is spent."""
        self._checks_left -= 1
        if self.spent():
            raise PlanningError(f"no program found within the search budget ({self.checks:,} checks, {self.cpu_s:g} s)")


@dataclass(frozen=True, slots=True)
class Example:
    """One public example: its inputs, the data held for it by id, and its answer."""

    inputs: dict[str, Any]
    holdings: dict[str, Any]
    output: dict[str, Any]

    @classmethod
    def of(cls, example: PublicExample) -> Example:
        return cls(example.inputs, example.holdings, example.output)


@dataclass(slots=True)
class World:
    """A package as the search sees it: examples, the actions its allowed subnets (and
    its outline, when it has one) offer, and the budget."""

    examples: tuple[Example, ...]
    actions: frozenset[str]
    budget: Budget
    description: str = ""
    schema: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, package: TaskPackage, budget: Budget) -> World:
        allowed = package.constraints.allowed_subnets
        kinds = {info.type for name, info in package.available_tools.items() if allowed is None or name in allowed}
        actions = frozenset(a for kind in kinds for a in TOOL_TYPES.get(kind, ()))
        if package.hint_tier == "outline" and package.steps:
            actions &= frozenset(step.action for step in package.steps)
        examples = tuple(Example.of(example) for example in package.examples)
        return cls(examples, actions, budget, package.description, package.inputs)

    def says(self, key: str) -> str:
        """What the description says about answer key ``key``: from ```key`:`` to the next
        ```name`:``, or "" when it says nothing under that key."""
        start = self.description.find(f"`{key}`:") if key else -1
        if start < 0:
            return ""
        rest = self.description[start + len(key) + 3 :]
        end = re.search(r"`[^`]+`:", rest)
        return rest[: end.start()] if end else rest

    def mentions(self, key: str) -> frozenset[str]:
        """The input refs the description names for answer key ``key``: a program for
        that key should read them."""
        part = self.says(key)
        if not part or not self.examples:
            return frozenset()
        return frozenset(f"${{input.{name}" for name in self.examples[0].inputs if f"`{name}`" in part)

    def decimals(self, key: str) -> int | None:
        """The decimals the description asks answer key ``key`` to be rounded to, if it says."""
        found = re.search(r"(\d{1,2}) decimal", self.says(key))
        return int(found.group(1)) if found else None

    def offers(self, *actions: str) -> bool:
        return all(action in self.actions for action in actions)

    def column(self, path: Sequence[str | int]) -> tuple[Any, ...] | None:
        """The value at input ``path`` in every example, or None where one lacks it."""
        values = []
        for example in self.examples:
            value: Any = example.inputs
            for key in path:
                if isinstance(value, dict) and key in value:
                    value = value[key]
                elif isinstance(value, list) and isinstance(key, int) and key < len(value):
                    value = value[key]
                else:
                    return None
            values.append(value)
        return tuple(values)


class Program:
    """Steps being written: each distinct ``(action, params)`` once, with ids ``n1``,
    ``n2``... in the order they were made, which is an order their references allow."""

    __slots__ = ("_steps", "_ids")

    def __init__(self) -> None:
        self._steps: dict[str, StepHint] = {}
        self._ids: dict[str, str] = {}

    def add(self, action: str, params: dict[str, Any]) -> str:
        """The id of the step running ``action`` on ``params``, made if it is new."""
        key = f"{action}:{_stable(params)}"
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = f"n{len(self._steps) + 1}"
            self._steps[found] = StepHint(id=found, action=action, kind=kind_of(action), params=params)
        return found

    def closure(self, final: str) -> list[StepHint]:
        """The steps ``final`` needs, in the order they were made, ``final`` last."""
        needed, todo = {final}, [final]
        while todo:
            for found in find_refs(self._steps[todo.pop()].params):
                if not found.is_input and found.node_id not in needed:
                    needed.add(found.node_id)
                    todo.append(found.node_id)
        order = [step for step_id, step in self._steps.items() if step_id in needed and step_id != final]
        return [*order, self._steps[final]]


def _stable(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def canonical(value: Any) -> str:
    """One string per JSON value, as the scorers compare them: keys sorted, integral
    floats as ints (``1.0 == 1``), booleans apart from numbers."""
    return json.dumps(_normal(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _normal(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _normal(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normal(item) for item in value]
    return value


@dataclass(frozen=True, slots=True)
class Fragment:
    """A value a program can produce, in every example: ``values`` (one per example),
    ``ref`` (a whole-string DataRef reading it with its JSON type) and ``text`` (a
    DataRef reading it as text, for templates). ``steps`` is how many steps it needs."""

    values: tuple[Any, ...]
    ref: str
    text: str
    steps: int = 0

    @property
    def key(self) -> str:
        return canonical(list(self.values))


_REGISTRY: ToolRegistry | None = None


def _registry() -> ToolRegistry:
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = default_registry()
    return _REGISTRY


def hold(action: str, params: dict[str, Any], holdings: Mapping[str, Any]) -> dict[str, Any] | None:
    """``params`` with held data in place of its id for the two readers of held data;
    None when the id names nothing held. Every other action sees the id as it is."""
    reader = HELD_READERS.get(action)
    if reader is None or reader[0] not in params:
        return params
    id_param, data_param = reader
    held_id = params[id_param]
    if not isinstance(held_id, str) or held_id not in holdings:
        return None
    rest = {key: value for key, value in params.items() if key != id_param}
    return {**rest, data_param: holdings[held_id]}


async def _run(steps: Sequence[StepHint], example: Example) -> dict[str, Any] | None:
    outputs: dict[str, Any] = {INPUT: example.inputs}
    registry = _registry()
    for step in steps:
        if step.action == "python_exec":
            return None
        try:
            resolved = compile_params(step.params).resolve(outputs)
        except (DataRefError, MissingField):
            return None
        params = hold(step.action, resolved, example.holdings)
        if params is None:
            return None
        try:
            result = await registry.call(step.action, params, ToolContext("synth", step.id, 1, _STEP_TIMEOUT_S))
        except ToolError:
            return None
        if result.output is None:
            return None
        outputs[step.id] = result.output.as_dict()
    return outputs[steps[-1].id]


def run_steps(steps: Sequence[StepHint], examples: Sequence[Example]) -> list[dict[str, Any] | None]:
    """The final output of ``steps`` on each example (None where a step fails)."""

    async def every() -> list[dict[str, Any] | None]:
        return [await _run(steps, example) for example in examples]

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # the usual case: a planner is called from plain, synchronous code
        return asyncio.run(every())
    # Called from inside an event loop (a caller that plans in its loop's thread): that
    # loop cannot be nested, so the checks run on their own loop in a thread of their own.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="synth") as pool:
        return pool.submit(asyncio.run, every()).result()


def check_program(steps: Sequence[StepHint], examples: Sequence[Example], matches: Any) -> bool:
    """Whether ``steps``' final output answers every example (``matches(output, answer)``)."""
    outputs = run_steps(steps, examples)
    return all(out is not None and matches(out, ex.output) for out, ex in zip(outputs, examples))


def fresh(examples: Sequence[Example]) -> list[Example]:
    """Inputs no example shows, made from the examples alone: each example with its lists
    reversed, and each example with one input that names no held data taken from the next
    example. Their answers are unknown; two programs that are both right agree on them."""
    made: list[Example] = []
    for i, example in enumerate(examples):
        reversed_lists = {
            key: value[::-1] if isinstance(value, list) else value for key, value in example.inputs.items()
        }
        if reversed_lists != example.inputs:
            made.append(Example(reversed_lists, example.holdings, {}))
        other = examples[(i + 1) % len(examples)].inputs
        for key, value in example.inputs.items():
            swapped = other.get(key, value)
            if swapped != value and not (isinstance(value, str) and value in example.holdings):
                made.append(Example({**example.inputs, key: swapped}, example.holdings, {}))
    return made


def agrees(found: Sequence[StepHint], reference: Sequence[StepHint], examples: Sequence[Example]) -> bool:
    """Whether ``found`` gives ``reference``'s final output on every :func:`fresh` input the
    reference runs on here, and there is at least one (``python_exec`` never runs here)."""
    inputs = fresh(examples)
    expected = run_steps(reference, inputs)
    compared = [example for example, out in zip(inputs, expected) if out is not None]
    if not compared:
        return False
    got = run_steps(found, compared)
    return all(
        out is not None and canonical(out) == canonical(want)
        for out, want in zip(got, (out for out in expected if out is not None))
    )
