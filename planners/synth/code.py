"""Code answers: the public function body with its constants written in front.

The body is the fenced ``python`` block of the description (or, at the ``full`` tier, a
hint's text that defines the entry point). Its constants are the upper-case names it
uses and never assigns; each is read from the input of the same name in lower case, or
from the column of that name in a one-row table (inline CSV, or held by id and read with
``csv_to_json`` on a data subnet). One ``extract_code_block`` step on a text subnet
writes the module from those values, so the plan is the body, the constants and, when
they are held, the one read: no smoke run, no separate template steps.

The module is checked here only as text: that it compiles and defines the entry point.
It is never executed in the miner.
"""

from __future__ import annotations

import builtins
import keyword
import re
from collections.abc import Mapping
from typing import Any

from protocol.dataref import INPUT, find_refs, ref
from protocol.synapse import StepHint

from ..base import PlanningError
from .tables import tables
from .world import Program, World

__all__ = ["code_program", "matches_code"]

_BLOCK = re.compile(r"```[ \t]*python[^\n]*\n(.*?)```", re.DOTALL)
_CONSTANT = re.compile(r"\b[A-Z][A-Z0-9_]*\b")
_ASSIGNED = re.compile(r"^\s*([A-Z][A-Z0-9_]*)\s*=", re.MULTILINE)


def matches_code(output: Mapping[str, Any], answer: Mapping[str, Any]) -> bool:
    code = output["artifacts"]["code"]
    entry = answer.get("entry_point")
    if not isinstance(code, str) or not isinstance(entry, str) or f"def {entry}(" not in code:
        return False
    try:
        compile(code, "<synthesised>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def code_program(world: World, program: Program, hints: list[StepHint]) -> list[StepHint]:
    entries = {example.output.get("entry_point") for example in world.examples}
    entry = next(iter(entries), None)
    if len(entries) != 1 or not isinstance(entry, str):
        raise PlanningError("the examples do not name one entry point")
    body = _body(world.description, hints, entry)
    if not world.offers("text_transform"):
        raise PlanningError("no text subnet to write the module with")
    sources = _sources(world, program)
    lines = []
    for name in _constants(body):
        found = sources.get(name.lower())
        if found is None:
            raise PlanningError(f"the body uses {name}, which no input or held table gives")
        reading, values = found
        lines.append(f'{name} = "{reading}"' if all(isinstance(v, str) for v in values) else f"{name} = {reading}")
    text = "```python\n" + "".join(f"{line}\n" for line in lines) + "\n" + body.replace("${", "$${") + "```\n"
    final = program.add("text_transform", {"op": "extract_code_block", "text": text, "language": "python"})
    return program.closure(final)


def _body(description: str, hints: list[StepHint], entry: str) -> str:
    """The public body that defines ``entry``: a fenced block of the description, or hint text."""
    texts = _BLOCK.findall(description)
    texts += [value for step in hints for value in _strings(step.params) if not find_refs(value)]
    for text in texts:
        if f"def {entry}(" in text:
            lines = text.splitlines()
            start = next(i for i, line in enumerate(lines) if f"def {entry}(" in line)
            indent = len(lines[start]) - len(lines[start].lstrip())
            return "\n".join(line[indent:] for line in lines).strip("\n") + "\n"
    raise PlanningError(f"neither the description nor the hints give the body of {entry}()")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _constants(body: str) -> list[str]:
    assigned = set(_ASSIGNED.findall(body))
    known = set(dir(builtins)) | set(keyword.kwlist)
    names = dict.fromkeys(_CONSTANT.findall(_without_strings(body)))
    return [name for name in names if name not in assigned and name not in known]


def _without_strings(body: str) -> str:
    return re.sub(r"'[^'\n]*'|\"[^\"\n]*\"", "''", body)


def _sources(world: World, program: Program) -> dict[str, tuple[str, tuple[Any, ...]]]:
    """Lower-case name → (a DataRef reading it, its value per example): scalar inputs,
    and the columns of one-row tables."""
    found: dict[str, tuple[str, tuple[Any, ...]]] = {}
    for name in world.examples[0].inputs:
        values = world.column([name])
        if values is not None and all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in values):
            found.setdefault(name.lower(), (ref(INPUT, name), values))
    for table in tables(world, program):
        if table.steps == 0 or not all(len(rows) == 1 for rows in table.values):
            continue
        step = table.ref[2:].partition(".")[0]
        for column in table.values[0][0]:
            values = tuple(rows[0].get(column) for rows in table.values)
            found[column.lower()] = (ref(step, "artifacts", "metadata", "result", 0, column), values)
    return found
