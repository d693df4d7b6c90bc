"""Finding a planner by name: a built-in, an installed plug-in, or ``package.module:attr``.

``load_planner(name, options)`` looks ``name`` up in this order:

1. the built-ins (``good``, ``naive`` and the attackers ``invalid``, ``precompute``);
   no plug-in can shadow them;
2. an entry point of group :data:`ENTRY_POINT_GROUP` (``dagnet.planners``) named
   ``name``, as an installed package declares it in its ``pyproject.toml``;
3. ``package.module:attr`` (``attr`` may be dotted), imported from ``sys.path``.

What it finds is a factory (a class or a function) called with ``options`` as
keyword arguments (a miner's ``[planner.options]`` settings), or a planner object
already made (then ``options`` must be empty). The result must have a ``plan``
method, and a declared ``interface`` must be :data:`PLANNER_INTERFACE`. Anything
else is a :class:`PlannerLoadError` whose message is one line.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from typing import Any

from .attackers import InvalidPlanner, PrecomputePlanner
from .base import PLANNER_INTERFACE, Planner
from .good import GoodPlanner
from .naive import NaivePlanner

__all__ = ["BUILTINS", "ENTRY_POINT_GROUP", "PlannerLoadError", "installed_planners", "load_planner"]

ENTRY_POINT_GROUP = "dagnet.planners"

BUILTINS: Mapping[str, Callable[..., Planner]] = {
    "good": GoodPlanner,
    "naive": NaivePlanner,
    "invalid": InvalidPlanner,
    "precompute": PrecomputePlanner,
}


class PlannerLoadError(Exception):
    """A planner name that cannot be loaded; ``str()`` is the one-line reason."""


def installed_planners() -> list[str]:
    """The names of the planners installed as ``dagnet.planners`` entry points."""
    return sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})


def load_planner(name: str, options: Mapping[str, Any] | None = None) -> Planner:
    """A fresh planner named ``name``, made with ``options``; see the module docstring."""
    found = _find(name)
    planner = _make(name, found, dict(options or {}))
    if not callable(getattr(planner, "plan", None)):
        raise PlannerLoadError(f"planner {name!r} is not a planner: {type(planner).__name__} has no plan() method")
    declared = getattr(planner, "interface", PLANNER_INTERFACE)
    if declared != PLANNER_INTERFACE:
        raise PlannerLoadError(
            f"planner {name!r} implements planner interface {declared!r}; this dagnet speaks {PLANNER_INTERFACE}"
        )
    if not isinstance(getattr(planner, "name", None), str):
        try:
            planner.name = name
        except AttributeError:
            pass
    return planner


def _find(name: str) -> Any:
    if name in BUILTINS:
        return BUILTINS[name]
    matches = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if matches:
        return _imported(name, matches[0].load)
    if ":" in name:
        return _imported(name, lambda: _attribute(name))
    known = ", ".join([*BUILTINS, *installed_planners()])
    raise PlannerLoadError(
        f"unknown planner {name!r}; known: {known} (or an installed {ENTRY_POINT_GROUP} entry point, "
        "or package.module:attr)"
    )


def _attribute(spec: str) -> Any:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise PlannerLoadError(f"planner {spec!r}: expected package.module:attr")
    _from_working_folder()
    found: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        found = getattr(found, part)
    return found


def _from_working_folder() -> None:
    """Let ``module:attr`` name a module in the working folder, as ``python -m`` does: a
    console script's ``sys.path`` starts with the script's own folder instead."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)


def _imported(name: str, load: Callable[[], Any]) -> Any:
    try:
        return load()
    except PlannerLoadError:
        raise
    except Exception as exc:
        raise PlannerLoadError(f"cannot import planner {name!r}: {type(exc).__name__}: {exc}") from None


def _make(name: str, found: Any, options: dict[str, Any]) -> Any:
    made = not isinstance(found, type) and callable(getattr(found, "plan", None))
    if made or not callable(found):
        if options:
            raise PlannerLoadError(f"planner {name!r} is an object, not a factory: it takes no options")
        return found
    try:
        return found(**options)
    except Exception as exc:
        raise PlannerLoadError(f"planner {name!r} could not be made: {type(exc).__name__}: {exc}") from None
