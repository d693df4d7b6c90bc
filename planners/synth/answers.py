"""JSON and text answers: split the answer into parts, find a fragment for each part,
and assemble them in one last step.

A JSON object is solved key by key (a value the inputs hold as they are, a pipeline
over a table, a number computed from numbers the program has); the last step writes the
object, with ``json_transform`` on a data subnet when one is offered, else with a
``text_transform`` template. A text answer is solved sentence by sentence (a search
per sentence) and joined by a template with the literal text between them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from protocol.dataref import INPUT, ref
from protocol.synapse import StepHint

from ..base import PlanningError
from .arith import CONSTANTS, Leaf, expressions
from .lookup import number_leaves, sentence, split_sentences
from .tables import pipelines, tables
from .world import Fragment, Program, World, canonical

__all__ = ["json_program", "matches_json", "matches_text", "text_program"]

_MAX_KEYS = 32


def matches_json(output: Mapping[str, Any], answer: Mapping[str, Any]) -> bool:
    try:
        return canonical(json.loads(output["text"])) == canonical(answer["json"])
    except ValueError:
        return False


def matches_text(output: Mapping[str, Any], answer: Mapping[str, Any]) -> bool:
    return output["text"] == answer["text"]


def json_program(world: World, program: Program) -> list[StepHint]:
    answers = tuple(example.output["json"] for example in world.examples)
    first = answers[0]
    if isinstance(first, dict) and first and all(isinstance(a, dict) and list(a) == list(first) for a in answers):
        if len(first) > _MAX_KEYS:
            raise PlanningError(f"the answer has {len(first)} keys; the search assembles at most {_MAX_KEYS}")
        found = _solve(world, program, {key: tuple(a[key] for a in answers) for key in first})
        return program.closure(_object(world, program, {key: found[key] for key in first}))
    found = _solve(world, program, {"": answers})
    return program.closure(_whole(world, program, found[""]))


def _solve(world: World, program: Program, wanted: dict[str, tuple[Any, ...]]) -> dict[str, Fragment]:
    found: dict[str, Fragment] = {}
    by_value = {canonical(list(values)): key for key, values in wanted.items()}
    for fragment in _inputs(world):
        key = by_value.get(fragment.key)
        if key is not None:
            found.setdefault(key, fragment)
    for table in tables(world, program):
        left = {value: key for value, key in by_value.items() if key not in found}
        if not left:
            break
        if table.key in left:
            found[left[table.key]] = table
        found.update({key: frag for key, frag in pipelines(world, program, table, left).items() if key not in found})
    _numbers(world, program, wanted, found)
    missing = [key or "the answer" for key in wanted if key not in found]
    if missing:
        raise PlanningError(f"no program of the catalogue gives {', '.join(map(repr, missing[:3]))} on every example")
    return found


def _numbers(world: World, program: Program, wanted: dict[str, tuple[Any, ...]], found: dict[str, Fragment]) -> None:
    """Numbers by calculator, in rounds: numbers found in one round are leaves of the
    next (a total over line amounts); shallow rounds first, and the inputs alone before
    constants join them."""
    searched: list[Leaf] | None = None
    fallback: dict[str, Fragment] = {}
    for constants, deep in (((), False), ((), True), (CONSTANTS, False), (CONSTANTS, True)):
        while True:
            numbers = {
                key: tuple(float(v) for v in values)
                for key, values in wanted.items()
                if key not in found and all(_number(v) for v in values)
            }
            if not numbers or not world.offers("calculator"):
                return
            if searched is None:
                searched = number_leaves(world, program)
            more = expressions(
                world,
                program,
                [*_leaves(world, found), *searched],
                numbers,
                deep=deep,
                constants=constants,
                fallback=fallback,
            )
            if not more:
                break
            found.update(more)
    found.update({key: fragment for key, fragment in fallback.items() if key not in found})


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _inputs(world: World) -> list[Fragment]:
    """Input values (and items of input lists) as they are."""
    out = []
    for name in world.examples[0].inputs:
        values = world.column([name])
        if values is None:
            continue
        out.append(Fragment(values, ref(INPUT, name), ref(INPUT, name)))
        if all(isinstance(v, list) for v in values):
            for index in range(min(8, min(len(v) for v in values))):
                column = tuple(v[index] for v in values)
                out.append(Fragment(column, ref(INPUT, name, index), ref(INPUT, name, index)))
    return out


def _leaves(world: World, found: dict[str, Fragment]) -> list[Leaf]:
    """Numbers a calculator may start from: numeric inputs, and numbers found for other keys."""
    leaves = [
        Leaf(f.text, tuple(float(v) for v in f.values), f.steps)
        for f in _inputs(world)
        if all(_number(v) for v in f.values)
    ]
    leaves += [
        Leaf(f.text, tuple(float(v) for v in f.values), f.steps)
        for f in found.values()
        if f.steps and all(_number(v) for v in f.values)
    ]
    return leaves


def _object(world: World, program: Program, parts: dict[str, Fragment]) -> str:
    """The step that writes the JSON object of ``parts``."""
    if world.offers("json_transform"):
        return program.add("json_transform", {"data": {key: f.ref for key, f in parts.items()}, "ops": []})
    if not world.offers("text_transform"):
        raise PlanningError("no data or text subnet to write the answer with")
    fields = []
    values = {}
    for index, (key, fragment) in enumerate(parts.items()):
        slot = f"{{v{index}}}"
        quoted = all(isinstance(v, str) for v in fragment.values)
        fields.append(f"{_braces(json.dumps(key))}: {_quoted(slot) if quoted else slot}")
        values[f"v{index}"] = fragment.text
    return program.add("text_transform", {"op": "template", "text": "{{" + ", ".join(fields) + "}}", "values": values})


def _quoted(slot: str) -> str:
    return f'"{slot}"'


def _braces(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _whole(world: World, program: Program, fragment: Fragment) -> str:
    """The step whose text is the JSON of ``fragment``."""
    step = fragment.text[2:].partition(".")[0]
    if fragment.steps and fragment.text == ref(step, "text") and not all(isinstance(v, str) for v in fragment.values):
        return step
    if world.offers("json_transform"):
        return program.add("json_transform", {"data": fragment.ref, "ops": []})
    raise PlanningError("no data subnet to write the answer with")


def text_program(world: World, program: Program) -> list[StepHint]:
    answers = [example.output["text"] for example in world.examples]
    split = [split_sentences(text) for text in answers]
    count = len(split[0])
    if any(len(parts) != count for parts in split):
        raise PlanningError("the examples' answers have different numbers of sentences")
    gaps = _gaps(answers, split)
    parts = []
    for index in range(count):
        fragment = sentence(world, program, tuple(parts[index] for parts in split))
        if fragment is None:
            raise PlanningError(f"no search finds sentence {index + 1} of the answer in every example")
        parts.append(fragment)
    if count == 1 and gaps == ["", ""]:
        return program.closure(parts[0].text[2:].partition(".")[0])
    if not world.offers("text_transform"):
        raise PlanningError("no text subnet to join the sentences with")
    text = _braces(gaps[0]) + "".join(f"{{s{i}}}{_braces(gap)}" for i, gap in enumerate(gaps[1:]))
    final = program.add(
        "text_transform",
        {"op": "template", "text": text, "values": {f"s{i}": part.text for i, part in enumerate(parts)}},
    )
    return program.closure(final)


def _gaps(answers: list[str], split: list[list[str]]) -> list[str]:
    """The literal text before, between and after the sentences: the same in every example."""
    found = None
    for text, parts in zip(answers, split):
        gaps, at = [], 0
        for part in parts:
            start = text.index(part, at)
            gaps.append(text[at:start])
            at = start + len(part)
        gaps.append(text[at:])
        if found is not None and gaps != found:
            raise PlanningError("the text between the answer's sentences differs between examples")
        found = gaps
    return found or []
