"""``agent``: the share of the goal checklist the final output's text satisfies.

Items: ``{"type": "keyword", "text"}`` (case-insensitive substring),
``{"type": "regex", "pattern"}`` (``re.search``), ``{"type": "json_key", "key":
"a.b", "equals"?}`` (the text is JSON and the dotted key exists, equal to
``equals`` after canonicalisation when given). An item that is malformed, of an
unknown type, or whose pattern does not compile counts as not passed, with the
reason in the details. Patterns come from the benchmark (trusted); only their
length is bounded here.

Nothing is credited for what the inputs already contain: an item the instance's inputs
satisfy by themselves (a ``json_key`` whose ``equals`` is an input value, a keyword or
pattern found in the inputs' JSON) is *given*. The quality is the share of the other
items passed, times the share of given items passed (they are still asked for), so a
plan that echoes its inputs scores 0. A checklist whose every item is given is scored
as a plain share.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from . import jsonvalue
from .base import Quality, output_text

MAX_PATTERN_CHARS = 1024


def score(reference: Mapping[str, Any], final_output: object, inputs: Mapping[str, Any] | None = None) -> Quality:
    """The checklist's share passed by ``final_output``, crediting nothing ``inputs`` already contain."""
    checklist = reference.get("goal_checklist")
    if not isinstance(checklist, list) or not checklist:
        return Quality.zero("task has no goal_checklist")
    text = output_text(final_output)
    results = [_check(item, text) for item in checklist]
    passed = sum(1 for result in results if result["passed"])
    given = [_given(item, inputs) for item in checklist] if inputs else [False] * len(checklist)
    for result, is_given in zip(results, given):
        if is_given:
            result["given"] = True
    credited = [result for result, is_given in zip(results, given) if not is_given]
    if len(credited) in (0, len(results)):
        value = passed / len(results)
    else:
        asked = [result for result, is_given in zip(results, given) if is_given]
        value = _share(credited) * _share(asked)
    return Quality(
        value, {"passed": passed, "total": len(results), "given": len(results) - len(credited), "items": results}
    )


def _share(results: list[dict[str, Any]]) -> float:
    return sum(1 for result in results if result["passed"]) / len(results)


def _given(item: object, inputs: Mapping[str, Any]) -> bool:
    """Whether ``inputs`` satisfy ``item`` by themselves: its ``equals`` is an input value,
    or its keyword or pattern is found in the inputs' JSON."""
    if not isinstance(item, dict):
        return False
    text = json.dumps(inputs, ensure_ascii=False, default=str)
    if item.get("type") == "json_key" and "equals" in item:
        wanted = jsonvalue.canonical(item["equals"])
        return any(jsonvalue.canonical(value) == wanted for value in _leaves(inputs))
    if item.get("type") == "keyword":
        return _keyword(item, text)[0]
    if item.get("type") == "regex":
        return _regex(item, text)[0]
    return False


def _leaves(value: Any) -> list[Any]:
    """Every value in ``value``: itself, and what its lists and objects hold, at any depth."""
    found = [value]
    children = value.values() if isinstance(value, Mapping) else value if isinstance(value, list) else ()
    for child in children:
        found += _leaves(child)
    return found


def _check(item: object, text: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        return {"type": None, "passed": False, "reason": "item is not an object"}
    kind = item.get("type")
    checker = _CHECKS.get(kind) if isinstance(kind, str) else None
    if checker is None:
        return {"type": kind if isinstance(kind, str) else None, "passed": False, "reason": "unknown item type"}
    passed, reason = checker(item, text)
    result: dict[str, Any] = {"type": kind, "passed": passed}
    if reason:
        result["reason"] = reason
    return result


def _keyword(item: Mapping[str, Any], text: str) -> tuple[bool, str]:
    needle = item.get("text")
    if not isinstance(needle, str) or not needle:
        return False, "keyword item needs a non-empty 'text'"
    return needle.casefold() in text.casefold(), ""


def _regex(item: Mapping[str, Any], text: str) -> tuple[bool, str]:
    pattern = item.get("pattern")
    if not isinstance(pattern, str) or not pattern:
        return False, "regex item needs a non-empty 'pattern'"
    if len(pattern) > MAX_PATTERN_CHARS:
        return False, f"pattern longer than {MAX_PATTERN_CHARS} characters"
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        return False, f"invalid pattern: {exc}"
    return compiled.search(text) is not None, ""


def _json_key(item: Mapping[str, Any], text: str) -> tuple[bool, str]:
    key = item.get("key")
    if not isinstance(key, str) or not key:
        return False, "json_key item needs a non-empty 'key'"
    try:
        document = jsonvalue.parse(text)
    except jsonvalue.NotJSON:
        return False, "text is not JSON"
    found, value = jsonvalue.lookup(document, key)
    if not found:
        return False, f"key {key!r} not found"
    if "equals" in item and jsonvalue.canonical(value) != jsonvalue.canonical(item["equals"]):
        return False, f"key {key!r} has a different value"
    return True, ""


_CHECKS: dict[str, Callable[[Mapping[str, Any], str], tuple[bool, str]]] = {
    "keyword": _keyword,
    "regex": _regex,
    "json_key": _json_key,
}
