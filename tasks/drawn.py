"""Families without end: fresh families drawn per tempo from a validator's secret.

:func:`drawn_families` draws ``count`` families from the grammar of typed compositions
(:mod:`tasks.grammar_data`: one to three held tables → filter/sort/group/aggregate →
maybe calculate → assemble; :mod:`tasks.grammar_lookup`: one to three held collections,
a search per subject and fact → join, or → extract → calculate → report;
:mod:`tasks.grammar_calc`: drawn formulas, maybe chained → report;
:mod:`tasks.grammar_code`: function bodies with drawn constants split over held config
tables, the module written in a drawn way). Each family is put together with the
curated families' parts (``profiles.make_family``, ``profiles.step``, held data named
as :mod:`tasks.held` names it), so it holds its data and writes its steps, profile and
public examples as the curated ones do; :func:`shape` is its program's structure, which
the draw varies too. Its id is ``gen_<12 hex>``, named by the secret, the tempo and the
draw. The types come in turn (data, rag, agent, code, from a turn the secret and tempo
choose), so forty drawn families are ten of each.

Every candidate is checked before use (:func:`check`); one that fails is replaced by
the next draw, so the result depends on the arguments alone:

- it needs subnets of at least two types;
- its description shows no value of any instance it was checked on;
- every answer value is exact (an integer, or a float of at most three decimals that
  prints as it is), on its public examples and :data:`HIDDEN` hidden instances;
- where the production can check its own program cheaply (a code body run here, with
  the instance's constants, on its cases), it agrees with the reference on them;
- its public examples determine it: no slot of the answer is the same in every example
  yet another on a hidden instance (a constant program would fit the examples), and no
  neighbour of the drawn production (another choice of the grammar at one slot of the
  answer) agrees with every example's answer yet differs on a hidden instance;
- with ``verify`` (the executing check, :func:`solves`: ``tasks`` cannot run a plan
  itself, so the validator hands it the run of one instance), its reference plan solves
  the instances of :func:`verified_seeds`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from protocol.dataref import find_refs
from protocol.hints import EXAMPLES
from protocol.synapse import TaskPackage

from .family import Family, Generator, Instance, draw_instance
from .grammar import Production, exact, slots
from .grammar_calc import draw_job
from .grammar_code import draw_code
from .grammar_data import draw_data
from .grammar_lookup import draw_lookup, draw_rag
from .held import held_inputs
from .seed import Draw, public_seed, text_seed

__all__ = [
    "HIDDEN",
    "PREFIX",
    "TYPES",
    "VERIFIED",
    "VERIFIED_CODE",
    "DrawnSet",
    "SeedRun",
    "Verifier",
    "candidate",
    "check",
    "check_seeds",
    "draw_set",
    "drawn_families",
    "shape",
    "solves",
    "verified_seeds",
]

PREFIX = "gen_"
HIDDEN = 8
"""Hidden instances every candidate's answers are checked on (besides its examples)."""
_ATTEMPTS_PER_FAMILY = 25
_PROFILE_INDICES = 60

Verifier = Callable[[Family], "str | None"]
SeedRun = Callable[[Family, int], "str | None"]
"""Runs a family's reference plan on its instance of one seed, as a validator runs a plan:
why it does not solve it (not completed, or quality below 1), or ``None``."""

VERIFIED = EXAMPLES + 1
"""Instances the reference plan runs on: every public example and one hidden instance."""
VERIFIED_CODE = 1
"""A code family's reference plan runs on its first public example only: a run there costs
two sandboxed processes (about a second), and the grammar's check has already run the
module's body on the cases of every checked instance (``tasks.grammar_code``)."""
"""Runs a family's reference plan; why it fails to solve an instance, or None."""

TYPES = ("data_transform", "rag", "agent", "code")
"""Drawn families take these types in turn, so any ``count`` of them is balanced."""
_PRODUCTIONS: dict[str, tuple[Callable[[Draw, int], Production], ...]] = {
    "data_transform": (draw_data,),
    "rag": (draw_rag,),
    "agent": (draw_lookup, draw_job),
    "code": (draw_code,),
}


@dataclass(frozen=True, slots=True)
class DrawnSet:
    """The families drawn, and every candidate the checks turned down: ``(id, reason)``."""

    families: tuple[Family, ...]
    rejected: tuple[tuple[str, str], ...]


def drawn_families(
    secret: int, tempo: int, count: int, verify: Verifier | None = None, types: tuple[str, ...] = TYPES
) -> tuple[Family, ...]:
    """``count`` checked families drawn for ``tempo`` from ``secret`` (deterministic), of ``types``
    in turn (a validator that cannot judge code leaves ``code`` out)."""
    return draw_set(secret, tempo, count, verify, types).families


@functools.lru_cache(maxsize=16)
def draw_set(
    secret: int, tempo: int, count: int, verify: Verifier | None = None, types: tuple[str, ...] = TYPES
) -> DrawnSet:
    """:func:`drawn_families` with the candidates turned down; cached per arguments."""
    if count < 0:
        raise ValueError("count must be >= 0")
    families: list[Family] = []
    rejected: list[tuple[str, str]] = []
    attempt, turn = 0, text_seed(f"dagnet drawn types:{secret}:{tempo}") % len(types)
    while len(families) < count:
        kind = types[(turn + len(families)) % len(types)]
        for _ in range(_ATTEMPTS_PER_FAMILY):
            production = candidate(secret, tempo, attempt, kind)
            attempt += 1
            try:
                reason = check(production, verify)
            except Exception as exc:  # a candidate the checks cannot even evaluate is turned down like any other
                reason = f"check failed: {type(exc).__name__}: {exc}"
            if reason is None:
                families.append(production.family)
                break
            rejected.append((production.family.task_id, reason))
        else:
            raise RuntimeError(
                f"no {kind} candidate passed the checks in {_ATTEMPTS_PER_FAMILY} draws; "
                f"last turned down: {rejected[-1]}"
            )
    return DrawnSet(tuple(families), tuple(rejected))


def candidate(secret: int, tempo: int, attempt: int, task_type: str) -> Production:
    """The ``task_type`` production of draw ``attempt`` for (``secret``, ``tempo``), under its ``gen_`` id."""
    digest = hashlib.sha256(f"dagnet drawn family:{secret}:{tempo}:{attempt}".encode()).digest()
    draw = Draw(int.from_bytes(digest[8:16], "big"))
    production = draw.choice(_PRODUCTIONS[task_type])(draw, draw.below(_PROFILE_INDICES))
    return replace(production, family=_renamed(production.family, PREFIX + digest[:6].hex()))


def _renamed(family: Family, task_id: str) -> Family:
    """``family`` under ``task_id``, its public examples drawn again for that id."""
    package = family.package.model_copy(update={"task_id": task_id})
    examples = Family(package, family.generate).public_examples(
        instances=list(_public_instances(family.generate, task_id))
    )
    return Family(package.model_copy(update={"examples": examples}), family.generate, family.program)


@functools.lru_cache(maxsize=8)
def _public_instances(generate: Generator, task_id: str) -> tuple[Instance, ...]:
    """The public instances of a family drawing with ``generate`` under ``task_id``: a
    candidate's are drawn to rename it, then read again by its checks. Keyed by the
    generator itself, so a family whose generator was replaced draws its own."""
    return tuple(draw_instance(generate, public_seed(task_id, index)) for index in range(EXAMPLES))


def check_seeds(task_id: str, n: int = HIDDEN) -> list[int]:
    """The hidden instance seeds a family's checks use (63-bit, like a validator's)."""
    return [text_seed(f"dagnet drawn check:{task_id}:{i}") >> 1 for i in range(n)]


def verified_seeds(family: Family) -> list[int]:
    """The public examples, then hidden instances: :data:`VERIFIED` (code: :data:`VERIFIED_CODE`) in all."""
    n = VERIFIED_CODE if family.task_type == "code" else VERIFIED
    seeds = [public_seed(family.task_id, i) for i in range(EXAMPLES)] + check_seeds(family.task_id)
    return seeds[:n]


def solves(run: SeedRun) -> Verifier:
    """The executing check: the reference plan, run by ``run``, solves every verified seed.
    Build it once and keep it: :func:`draw_set` caches per ``verify`` too."""

    def verify(family: Family) -> str | None:
        for seed in verified_seeds(family):
            reason = run(family, seed)
            if reason is not None:
                return reason
        return None

    return verify


def check(production: Production, verify: Verifier | None = None) -> str | None:
    """Why ``production``'s family may not be used, or ``None`` (the checks above)."""
    family = production.family
    types = {info.type for info in family.package.available_tools.values()}
    if len(types) < 2:
        return f"needs two subnet types, has {sorted(types)}"
    examples = list(_public_instances(family.generate, family.task_id))
    hidden = [family.instance(seed) for seed in check_seeds(family.task_id)]
    for instance in (*examples, *hidden):
        shown = _shown_value(family.package.description, instance.inputs)
        if shown is not None:
            return f"description shows the instance value {shown!r} (seed {instance.seed})"
        if not exact(slots(family.task_type, instance.reference)):
            return f"inexact reference value (seed {instance.seed})"
        disagreement = production.consistent(instance) if production.consistent else None
        if disagreement is not None:
            return f"program and reference disagree (seed {instance.seed}): {disagreement}"
    reason = undetermined(production, examples, hidden)
    if reason is None and verify is not None:
        reason = verify(family)
    return reason


def undetermined(production: Production, examples: list[Instance], hidden: list[Instance]) -> str | None:
    """Why the examples do not determine the task: a neighbour that agrees with every
    example but not with a hidden instance; ``None`` when there is none."""
    kind = production.family.task_type
    answers = {id(i): slots(kind, i.reference) for i in (*examples, *hidden)}
    for slot, value in answers[id(examples[0])].items():  # a program that ignores the instance
        if all(_same(lambda i: value, i, answers[id(i)][slot]) for i in examples):  # noqa: B023  (called here, within the iteration)
            for i in hidden:
                if not _same(lambda i: value, i, answers[id(i)][slot]):  # noqa: B023  (called here, within the iteration)
                    return (
                        f"examples do not determine `{slot}`: it is {value!r} in every example but not on seed {i.seed}"
                    )
    for slot, options in production.neighbours.items():
        for name, answer in options.items():
            if all(_same(answer, i, answers[id(i)][slot]) for i in examples):
                for i in hidden:
                    if not _same(answer, i, answers[id(i)][slot]):
                        return f"examples do not determine `{slot}`: {name} agrees with them but not on seed {i.seed}"
    return None


ProgramShape = tuple[tuple[str, str, "str | None", tuple[int, ...], tuple[int, ...]], ...]


def shape(package: TaskPackage) -> ProgramShape:
    """The program shape of ``package``'s full-tier steps: per step, in order, its action,
    kind and text op, the steps it reads (by position) and the held-data inputs it reads
    (by their position among the inputs). Names, constants, queries, ``json_transform``
    pipelines and plain input reads are left out, so two families differ in shape only
    by how many steps read what and how the steps are wired (docs/tasks.md, "Drawn
    families")."""
    position = {step.id: n for n, step in enumerate(package.steps)}
    names = list(package.inputs.get("properties", {}))
    held = set(held_inputs(package.inputs))
    out = []
    for step in package.steps:
        refs = find_refs(step.params)
        steps = sorted({position[r.node_id] for r in refs if not r.is_input})
        inputs = sorted({names.index(r.path[0]) for r in refs if r.is_input and r.path[0] in held})
        op = step.params.get("op") if isinstance(step.params.get("op"), str) else None
        out.append((step.action, step.kind, op, tuple(steps), tuple(inputs)))
    return tuple(out)


def _same(answer: Callable[[Instance], Any], instance: Instance, expected: Any) -> bool:
    try:
        got = answer(instance)
    except (ArithmeticError, ValueError, TypeError, KeyError, IndexError):
        return False
    return json.dumps(got, sort_keys=True) == json.dumps(expected, sort_keys=True)


def _shown_value(description: str, inputs: dict[str, Any]) -> str | None:
    """An input value of the instance (a string of three or more characters, a number
    of three or more digits) that ``description`` contains as a whole word."""
    for value in _leaves(inputs):
        text = str(value)
        if isinstance(value, bool) or len(text.lstrip("-")) < 3 or text not in description:
            continue  # (a word the description contains is a substring of it first)
        if re.search(rf"(?<![\w-]){re.escape(text)}(?![\w-])", description):
            return text
    return None


def _leaves(value: Any) -> Iterable[Any]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    else:
        yield value
