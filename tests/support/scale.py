"""How large the suite's searches run: at full size in a run that includes the ``e2e`` tests
(README's test command, which CI runs), at a quarter in the quick loop (``-m "not e2e"``).

A property test's number of examples (:func:`examples`) and the seeds, secrets or tempos a
census test walks (:func:`cases`) are what a developer's loop can spare: every test still
runs there, on one case in four, and the whole suite runs them all. A test's assertions must
hold at both sizes: a bound a quarter of the census cannot show either keeps its full size (an
instance's answer agreeing with another's on at most 5 % of 200 seeds) or scales with it
(twenty program shapes over a hundred tempos, eight over twenty-five).
``DAGNET_TEST_SCALE=full`` (or ``quick``) sets the size outright, so a quick loop can run one
module at full size.

``tests/conftest.py`` calls :func:`configure` before any test module is imported (pytest
imports them at collection, after ``pytest_configure``); each xdist worker parses the same
command line, so every worker collects the same cases.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TypeVar

__all__ = ["ENV", "QUICK_SHARE", "cases", "configure", "examples", "leaves_out_e2e", "quick", "selects_no_e2e"]

T = TypeVar("T")

ENV = "DAGNET_TEST_SCALE"
QUICK_SHARE = 4
"""The quick loop runs one case in this many (at least one)."""

_quick = False


def leaves_out_e2e(markexpr: str | None) -> bool:
    """Whether a run's ``-m`` expression is the quick loop's (it leaves the e2e tests out)."""
    return "not e2e" in (markexpr or "")


def selects_no_e2e(markexpr: str | None) -> bool:
    """Whether a run's ``-m`` expression is ``not e2e`` itself, which no ``e2e`` test passes
    (``not e2e or slow`` counts as the quick loop for the sizes, yet may select e2e tests)."""
    return " ".join((markexpr or "").split()) == "not e2e"


def configure(markexpr: str | None) -> None:
    """Set the size from the run's ``-m`` expression, or from :data:`ENV` when it is set."""
    global _quick
    chosen = os.environ.get(ENV, "").strip().lower()
    if chosen not in ("", "full", "quick"):
        raise ValueError(f"{ENV} must be 'full' or 'quick', not {chosen!r}")
    _quick = chosen == "quick" if chosen else leaves_out_e2e(markexpr)


def quick() -> bool:
    """Whether this run is the quick loop."""
    return _quick


def examples(full: int) -> int:
    """A property test's ``max_examples``: ``full``, or a :data:`QUICK_SHARE` of it in the quick loop."""
    return max(1, full // QUICK_SHARE) if _quick else full


def cases(full: Sequence[T]) -> list[T]:
    """The cases a census walks: all of ``full``, or one in :data:`QUICK_SHARE` of them in
    the quick loop, from the first (the one a test names first: its main example) and
    spread over the rest, so a list sorted by task type keeps every type."""
    return list(full[::QUICK_SHARE] if _quick else full)
