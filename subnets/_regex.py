"""Regular expressions from untrusted params, compiled only when provably cheap.

Python's ``re`` backtracks and has no timeout, so a hostile pattern can pin a
core for hours (``(a+)+b`` on 30 characters, ``\\w*\\w*\\w*x`` on 1,000). Instead
of a timeout, a pattern is accepted only when its worst case is bounded:

* refused outright: back-references and conditionals, and any quantifier
  inside a repeated group, or alternation inside one — the shapes whose
  backtracking grows exponentially (``(a+)+``, ``(a|aa)+``, ``(ab?)*``);
* what remains backtracks at most about ``n ** (k + 1) * b`` steps for an input
  of ``n`` characters, ``k`` repeats (quantifiers allowing more than one match)
  and ``b`` the product of the alternatives and optional parts (``?``). That
  estimate must stay under :data:`WORK_BUDGET`, so one ``.*`` may scan 16 KiB,
  while three adjacent repeats are limited to about 128 characters.
"""

from __future__ import annotations

import re
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser  # type: ignore[attr-defined]
from typing import Any

from .base import ToolError

MAX_PATTERN_CHARS = 256
WORK_BUDGET = 2**28
"""About 0.1–0.5 s of backtracking on a typical core."""

_REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT}
_REFUSED = {sre.GROUPREF: "back-references", sre.GROUPREF_EXISTS: "conditional groups"}


def compile_guarded(pattern: str, text_chars: int) -> re.Pattern[str]:
    """Compile ``pattern`` for a text of ``text_chars``, or raise ``ToolError`` saying why not."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ToolError(f"bad params: pattern: longer than {MAX_PATTERN_CHARS} characters")
    try:
        compiled = re.compile(pattern)
        parsed = _parser.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise ToolError(f"bad params: pattern: invalid regular expression ({exc})") from None
    repeats, branches = _shape(parsed, in_repeat=False)
    work = max(text_chars, 1) ** (repeats + 1) * branches
    if work > WORK_BUDGET:
        raise ToolError(
            f"bad params: pattern: too costly for {text_chars} characters of input "
            f"({repeats} repeats, {branches} alternatives); simplify it or shorten the text"
        )
    return compiled


def _shape(items: Any, *, in_repeat: bool) -> tuple[int, int]:
    """(repeats, alternative product) of a parsed (sub)pattern; ``ToolError`` if refused."""
    repeats, branches = 0, 1
    for op, av in items:
        if op in _REFUSED:
            raise ToolError(f"bad params: pattern: {_REFUSED[op]} are not supported")
        r, b = _node_shape(op, av, in_repeat=in_repeat)
        repeats, branches = repeats + r, branches * b
    return repeats, branches


def _node_shape(op: Any, av: Any, *, in_repeat: bool) -> tuple[int, int]:
    if op in _REPEATS:
        low, high, body = av
        if in_repeat:
            raise ToolError("bad params: pattern: quantifiers inside a repeated group are not supported")
        if high <= 1:  # optional: one more way to match, not a scan
            r, b = _shape(body, in_repeat=in_repeat)
            return r, b * 2
        r, b = _shape(body, in_repeat=True)
        return r + 1, b
    if op is sre.BRANCH:
        if in_repeat:
            raise ToolError("bad params: pattern: alternation inside a repeated group is not supported")
        shapes = [_shape(alt, in_repeat=False) for alt in av[1]]
        return sum(r for r, _ in shapes), sum(b for _, b in shapes)
    if op is sre.SUBPATTERN:
        return _shape(av[3], in_repeat=in_repeat)
    if op in (sre.ASSERT, sre.ASSERT_NOT):
        return _shape(av[1], in_repeat=in_repeat)
    if op is sre.ATOMIC_GROUP:
        return _shape(av, in_repeat=in_repeat)
    return 0, 1
