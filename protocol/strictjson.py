"""Strict JSON: the standard's grammar, without Python's ``NaN`` and ``Infinity``, and
text that is Unicode (no lone UTF-16 surrogate).

Everything dagnet parses from a peer, a sandbox or a user's file goes through
:func:`loads`, so one rule decides what counts as JSON everywhere.
"""

from __future__ import annotations

import json
import re
from typing import Any

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
"""The start of a ``\\uD800``–``\\uDFFF`` escape: the only way a UTF-8 JSON text spells a
surrogate (a pair of them is one character and fine; one alone is not text)."""
_SURROGATE_ESCAPE_BYTES = re.compile(_SURROGATE_ESCAPE.pattern.encode())


def loads(text: str | bytes) -> Any:
    """The JSON value in ``text``; ``ValueError`` says why it is not one.

    ``NaN``, ``Infinity`` and ``-Infinity`` are refused, and so are values nested past
    the interpreter's recursion limit, integers past its digit limit and strings holding
    a lone surrogate (``"\\ud800"``): Python reads one into a ``str`` that no UTF-8
    encoder, hash or SQLite column takes, so a peer could make whoever stores it fail.
    """
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if _may_hold_surrogates(text):
        _refuse_lone_surrogates(value)
    return value


def _may_hold_surrogates(text: str | bytes) -> bool:
    """Cheap, and never wrong when it says no: a UTF-8 text holds a surrogate only as an
    escape; other encodings (``json.loads`` reads UTF-16 and UTF-32 too) and a ``str``
    with non-ASCII characters get the full check."""
    if isinstance(text, str):
        return not text.isascii() or _SURROGATE_ESCAPE.search(text) is not None
    if json.detect_encoding(text) != "utf-8":
        return True
    return _SURROGATE_ESCAPE_BYTES.search(text) is not None


def _refuse_lone_surrogates(value: Any) -> None:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("a string holds a lone UTF-16 surrogate (not Unicode text)") from None
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")
