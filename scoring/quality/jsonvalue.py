"""JSON values as the scorers compare them: strict parsing, canonical form, dotted lookup."""

from __future__ import annotations

import json
from typing import Any

from protocol import strictjson

MAX_DEPTH = 64
"""Deeper values are refused: canonicalisation recurses."""


class NotJSON(ValueError):
    """The text is not a JSON value the scorers accept."""


def parse(text: str) -> Any:
    """Parse strict JSON (no NaN/Infinity, at most MAX_DEPTH deep) or raise NotJSON."""
    try:
        value = strictjson.loads(text)
    except ValueError as exc:
        raise NotJSON(str(exc) or type(exc).__name__) from None
    _normal(value, 0)  # raises NotJSON when too deep
    return value


def canonical(value: Any) -> str:
    """One string per JSON value: keys sorted, integral floats written as ints (1.0 == 1),
    booleans kept apart from numbers (true != 1)."""
    return json.dumps(_normal(value, 0), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def lookup(value: Any, dotted: str) -> tuple[bool, Any]:
    """Follow ``a.b.0``: keys of objects, numeric segments index arrays."""
    current = value
    for segment in dotted.split("."):
        if isinstance(current, dict) and segment in current:
            current = current[segment]
        elif isinstance(current, list) and segment.isdigit() and int(segment) < len(current):
            current = current[int(segment)]
        else:
            return False, None
    return True, current


def _normal(value: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise NotJSON(f"nested deeper than {MAX_DEPTH}")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _normal(item, depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normal(item, depth + 1) for item in value]
    return value
