"""Drawn families come in many program shapes (tasks/drawn.py ``shape``): over a hundred
tempos of one secret every task type shows at least twenty, and the number of held
tables or collections a family reads, and how its steps are wired, differ family by
family. Before the grammar drew them, the same count gave data 1, rag 2, agent 3 and
code 1: a parser that knew four skeletons rebuilt every drawn family's steps from its
goal package (issue 28)."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest

from support.scale import cases, quick
from tasks.drawn import TYPES, drawn_families, shape
from tasks.held import held_inputs

TEMPO_NUMBERS = cases(range(100))
"""A hundred tempos; the quick loop draws one in four of them (``support.scale``)."""
TEMPOS = len(TEMPO_NUMBERS)
SHAPES = 8 if quick() else 20
"""Program shapes each type shows at least: twenty over a hundred tempos. Over the quick
loop's twenty-five, eight: they give 11 to 17 a type (two secrets), and the four skeletons
the grammar replaced gave 1 to 3 over a hundred."""
SECRETS = (1, 0x5EC12E7)


def _drawn(secret: int) -> dict[str, list]:
    """One family of each type per tempo, over :data:`TEMPO_NUMBERS` (checks 1–5, no run)."""
    by_type = defaultdict(list)
    for tempo in TEMPO_NUMBERS:
        for family in drawn_families(secret, tempo, len(TYPES)):
            by_type[family.task_type].append(family)
    return by_type


@pytest.fixture(
    scope="module",
    params=[pytest.param(secret, marks=pytest.mark.xdist_group(f"drawn-shapes-{secret}")) for secret in cases(SECRETS)],
)
def drawn(request) -> dict[str, list]:
    """A secret's draws, built once on the one worker its tests go to (a group per secret:
    two workers build the two secrets side by side)."""
    return _drawn(request.param)


def test_every_type_draws_twenty_program_shapes_over_a_hundred_tempos(drawn) -> None:
    """Eight over the quick loop's twenty-five tempos (:data:`SHAPES`)."""
    counts = {kind: len({shape(f.package) for f in families}) for kind, families in drawn.items()}
    assert set(counts) == set(TYPES)
    assert {kind: n for kind, n in counts.items() if n < SHAPES} == {}, counts


@pytest.mark.parametrize("kind", ["data_transform", "rag", "agent", "code"])
def test_how_many_held_inputs_a_family_reads_is_drawn(drawn, kind) -> None:
    """One to three tables or collections, named by the inputs, each read by its own steps."""
    reads = {len(held_inputs(f.package.inputs)) for f in drawn[kind]}
    assert reads >= ({1, 2} if kind == "agent" else {1, 2, 3})


def _reads_of(family, action: str) -> list[set[str]]:
    """For each step of ``action``, the actions of the steps it reads."""
    steps = shape(family.package)
    return [{steps[n][0] for n in reads} for act, _, _, reads, _ in steps if act == action]


def test_steps_are_wired_in_drawn_ways(drawn) -> None:
    """A calculator builds on another calculator (agent) or joins two branches (data);
    the branches of one data family read different tables."""
    assert any({"calculator"} <= reads for f in drawn["agent"] for reads in _reads_of(f, "calculator"))
    assert any({"json_transform"} == reads for f in drawn["data_transform"] for reads in _reads_of(f, "calculator"))
    assert any(
        len({steps[3] for steps in shape(f.package) if steps[0] == "json_transform"}) > 1
        for f in drawn["data_transform"]
    )


def test_unnamed_columns_are_found_only_by_reading(drawn) -> None:
    """A data family that calls its columns by role names none of them in its package
    but the full-tier steps: the examples' held tables are where a planner learns them."""
    unnamed = [f for f in drawn["data_transform"] if "found by reading" in f.package.description]
    assert len(unnamed) >= TEMPOS // 4
    for family in unnamed:
        example = family.package.examples[0]
        columns = {column for held in example.holdings.values() for column in held.partition("\n")[0].split(",")}
        said = family.package.description + str(family.package.inputs)
        assert [c for c in columns if re.search(rf"\b{re.escape(c)}\b", said)] == [], family.task_id


def test_a_held_table_puts_its_columns_in_an_order_drawn_per_instance(drawn) -> None:
    """A plan reads columns by name: a parser that takes them by position reads the wrong
    one on another instance."""

    def headers(family) -> set[str]:
        return {held.partition("\n")[0] for example in family.package.examples for held in example.holdings.values()}

    for kind, least in (("data_transform", TEMPOS // 2), ("code", TEMPOS // 10)):  # a code table often has one column
        assert sum(len(headers(f)) > len(held_inputs(f.package.inputs)) for f in drawn[kind]) >= least, kind
