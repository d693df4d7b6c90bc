"""Strict JSON: the standard's grammar, without Python's ``NaN`` and ``Infinity``.

Everything dagnet parses from a peer, a sandbox or a user's file goes through
:func:`loads`, so one rule decides what counts as JSON everywhere.
"""

from __future__ import annotations

import json
from typing import Any


def loads(text: str | bytes) -> Any:
    """The JSON value in ``text``; ``ValueError`` says why it is not one.

    ``NaN``, ``Infinity`` and ``-Infinity`` are refused, and so are values nested past
    the interpreter's recursion limit and integers past its digit limit.
    """
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")
