"""What every production of the family grammar (:mod:`tasks.drawn`) hands the checks.

A *production* is one drawn composition: the family the curated builders make of it
(``data_families._family``, ``rag_families._family``, ...), and, for each *slot* of its
answer (a JSON key, the text, a code function's results), the *neighbours*: the answers
the grammar's other choices at that slot would give on the same instance. The checks
in :mod:`tasks.drawn` use them to prove that the public examples determine the task.

The readers below find an instance's data where the family keeps it: inline in the
inputs, or held by id (``Task.holdings``; docs/tasks.md, "Held data").
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .family import Family, Instance

__all__ = ["Neighbour", "Production", "exact", "held_rows", "slots"]

Neighbour = Callable[[Instance], Any]
"""What another choice of the grammar answers at a slot on an instance."""


@dataclass(frozen=True, slots=True)
class Production:
    """One drawn composition: its family (under a provisional id), per answer slot the
    neighbours the grammar offers there (name → answer), and its self-check."""

    family: Family
    neighbours: Mapping[str, Mapping[str, Neighbour]] = field(default_factory=dict)
    consistent: Callable[[Instance], str | None] | None = None
    """Why the production's program disagrees with its reference on an instance, or None:
    a cheap check of what the executing one runs on a few instances only."""


def slots(task_type: str, reference: Mapping[str, Any]) -> dict[str, Any]:
    """An instance's answer, slot by slot, from its reference (what a plan must produce)."""
    if task_type == "data_transform":
        return dict(reference["expected_output"])
    if task_type == "agent":
        return {item["key"]: item["equals"] for item in reference["goal_checklist"] if item["type"] == "json_key"}
    if task_type == "rag":
        return {"text": reference["reference_answer"]}
    return {"cases": [case["expected"] for case in reference["cases"]]}


def _held(instance: Instance, name: str, inline: str) -> Any:
    """The value the input ``name`` names in the holdings, else the inline input."""
    held = instance.inputs.get(name)
    if isinstance(held, str) and held in instance.holdings:
        return instance.holdings[held]
    return instance.inputs[inline]


def held_rows(instance: Instance, name: str = "table", inline: str = "csv") -> list[dict[str, Any]]:
    """The instance's table as records, whole-number cells as ints (``csv_to_json(numeric=True)``)."""
    reader = csv.DictReader(io.StringIO(_held(instance, name, inline)))
    return [{key: _number(value) for key, value in row.items()} for row in reader]


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        return text


_MAX_MAGNITUDE = 10**12
_MAX_DECIMALS = 3


def exact(value: Any) -> bool:
    """Whether every number in ``value`` is exact: an int, or a float of at most three
    decimals that prints as it is (so every machine scores it alike), below 10^12."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return True
    if isinstance(value, int):
        return abs(value) < _MAX_MAGNITUDE
    if isinstance(value, float):
        return (
            math.isfinite(value)
            and abs(value) < _MAX_MAGNITUDE
            and round(value, _MAX_DECIMALS) == value
            and float(f"{value:.12g}") == value
        )
    if isinstance(value, Mapping):
        return all(exact(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(exact(v) for v in value)
    return False
