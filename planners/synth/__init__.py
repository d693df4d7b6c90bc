"""Planning by example: the steps a package's public examples call for, found by search.

:func:`synthesise` reads only what every package carries at every tier: the answers of
its public examples (``{"json"}``, ``{"text"}`` or ``{"entry_point", "cases"}``), their
inputs and held data, the input schema, the description and the actions of the subnets
on offer (narrowed to the outline's actions at the ``outline`` tier). It never reads the
task id. It enumerates small programs over the action catalogue, typed by the values
they give on the examples (:mod:`.answers`, :mod:`.tables`, :mod:`.arith`,
:mod:`.lookup`, :mod:`.code`), and returns the step hints of the first program that
reproduces every example's answer with the reference tools (:mod:`.world`), or raises
:class:`~planners.base.PlanningError` saying what it could not find.

The search is bounded by :data:`SEARCH_CHECKS` counted steps, so it finds the same
program on every machine; a miner adds :data:`CPU_BUDGET_S` of this thread's CPU and a
wall cap, which a validator's reference leaves out (``math.inf``). Its outcome, found or
not, is cached by the package's content and the budget, so a task sent again, under any
id, is not searched again.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict

from protocol.synapse import StepHint, TaskPackage

from ..base import PlanningError
from .answers import json_program, matches_json, matches_text, text_program
from .code import code_program, matches_code
from .world import Budget, Example, Program, World, agrees, check_program

__all__ = ["CPU_BUDGET_S", "SEARCH_CHECKS", "WALL_BUDGET_S", "agrees_with_hints", "synthesise"]

SEARCH_CHECKS = 6_000
"""Counted steps one package's search may take: every curated family is found within
4,700 and 439 of 440 drawn ones (docs/tasks.md); at the slowest rate measured, 2,600 a
CPU second, 6,000 is 2.3 s."""
CPU_BUDGET_S = 3.0
"""CPU seconds one package's search may use."""
WALL_BUDGET_S = 4.0
"""Wall seconds, whatever the load: the miner answers within its planning deadline."""
_CACHE_SIZE = 512

_cache: OrderedDict[str, list[StepHint] | str] = OrderedDict()
_lock = threading.Lock()


def synthesise(
    package: TaskPackage,
    *,
    checks: int = SEARCH_CHECKS,
    cpu_s: float = CPU_BUDGET_S,
    wall_s: float = WALL_BUDGET_S,
) -> list[StepHint]:
    """The steps of a program that answers every public example of ``package``."""
    key = f"{_content_key(package)}/{checks}/{cpu_s}/{wall_s}"
    with _lock:
        cached = _cache.get(key)
        if cached is not None:
            _cache.move_to_end(key)
    if cached is None:
        try:
            cached = _search(package, Budget(checks, cpu_s, wall_s))
        except PlanningError as exc:
            cached = str(exc)
        with _lock:
            _cache[key] = cached
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
    if isinstance(cached, str):
        raise PlanningError(cached)
    return [step.model_copy() for step in cached]


def _content_key(package: TaskPackage) -> str:
    """What the search reads of ``package``: never its id, budget or send block."""
    allowed = package.constraints.allowed_subnets
    content = {
        "description": package.description,
        "inputs": package.inputs,
        "tier": package.hint_tier,
        "kinds": sorted(
            {info.type for name, info in package.available_tools.items() if allowed is None or name in allowed}
        ),
        "steps": [step.model_dump() for step in package.steps],
        "examples": [example.model_dump() for example in package.examples],
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()


def _search(package: TaskPackage, budget: Budget) -> list[StepHint]:
    world = World.of(package, budget)
    if not world.examples:
        raise PlanningError("the package has no public examples to plan from")
    shapes = {frozenset(example.output) for example in world.examples}
    if len(shapes) != 1:
        raise PlanningError("the public examples' answers are not of one shape")
    shape = next(iter(shapes))
    program = Program()
    if shape == {"json"}:
        steps, matches = json_program(world, program), matches_json
    elif shape == {"text"}:
        steps, matches = text_program(world, program), matches_text
    elif shape == {"entry_point", "cases"}:
        steps, matches = code_program(world, program, package.steps), matches_code
    else:
        raise PlanningError(f"an answer of the form {sorted(shape)} is not one the search knows")
    budget.check()
    if not check_program(steps, world.examples, matches):
        raise PlanningError("the program found does not reproduce every public example")
    return steps


def agrees_with_hints(package: TaskPackage, steps: list[StepHint]) -> bool:
    """Whether ``steps`` give what ``package``'s hinted steps give on inputs no example
    shows (:func:`~.world.fresh`): a found program that only fits the examples by chance
    (reads one subject where the hints read two) differs there. Hints this process never
    runs (``python_exec``: a code task's module) cannot be compared, so a found program is
    judged on the examples alone there, as at the goal tier."""
    if any(step.action == "python_exec" for step in package.steps):
        return True
    return agrees(steps, package.steps, [Example.of(example) for example in package.examples])
