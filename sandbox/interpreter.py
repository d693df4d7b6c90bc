"""The interpreter sandboxed runs use: the caller's base Python, never its virtualenv.

A virtualenv's site-packages holds the caller's own code (an installed validator,
its task generators); the base interpreter runs the standard library without it.
"""

from __future__ import annotations

import os
import sys
from functools import cache


@cache
def interpreter() -> str:
    """The real path of the base interpreter behind ``sys.executable``."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(base)


def base_prefix() -> str:
    return os.path.realpath(sys.base_prefix)
