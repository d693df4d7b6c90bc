"""The data productions of the family grammar: the held data split across one to three
tables, each read once, questions asked of them, maybe a figure combining two answers,
and the JSON object assembled: parse → filter/sort/group/aggregate → (calculate) →
assemble.

Each table's schema (its name, which is also the input naming it, and its id, group and
number fields) comes from word lists; the tables of a family share their group values
and number range, so the inputs `group`, `threshold` and `n` mean one thing for all of
them. Half the families name the columns in the description; the other half call them
by role (its id, group and number column), so a planner learns their names only by
reading the table; every instance's table puts its columns in a drawn order. The questions come from the curated six (``data_families.QUESTIONS``)
and the compositions below (filter-then-top, group-then-max, two filters, ...), two to
four of them (three when there are three tables), each of one table, every table asked at least once, in drawn order; a
third of the families add a figure that is two numeric answers added or subtracted (a
``calculator`` step wired to the two branches). So how many reads, which branch reads
which table and whether a calculator joins two branches differ family by family.

A question's neighbours are every other question of the catalogue asked of the same
table, every question asked of another table, the question without its ``limit``
(when every example's group holds no more than ``n`` rows, the examples cannot tell the
two apart) and, for a count or a sum, how many of a table's first rows (one, or ``n``)
pass a filter (a count that is 0 or 1 in the examples is fit by such a program, on any
table); the combined figure's are the other operation, the operands swapped and
either answer alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protocol.dataref import INPUT, ref

from .data_families import QUESTIONS, Question, Table, _rows
from .family import Instance
from .grammar import Production, held_rows
from .held import held_id, table_schema
from .profiles import make_family, step
from .seed import Draw

__all__ = ["CATALOGUE", "draw_data"]

_TABLES = (
    "parcels",
    "tickets",
    "rentals",
    "visits",
    "repairs",
    "loans",
    "shipments",
    "matches",
    "patients",
    "harvests",
    "concerts",
    "trips",
)
_IDS = ("code", "ref", "tag", "serial", "label", "ticket_no")
_GROUPS = ("area", "team", "branch", "category", "season", "depot", "carrier", "district")
_GROUP_VALUES = (
    ("red", "blue", "green", "amber"),
    ("alpha", "beta", "gamma", "delta"),
    ("spring", "summer", "autumn", "winter"),
    ("ash", "oak", "elm", "yew"),
    ("tin", "zinc", "iron"),
    ("bay", "cove", "fjord", "strait"),
    ("north", "south", "east", "west"),
)
_NUMBERS = ("weight_kg", "count", "price", "minutes", "distance_km", "points", "load", "volume_l")
_RANGES = ((0, 50), (1, 99), (10, 500), (100, 2000), (-40, 40), (1000, 90000))
_PREFIXES = "ABCDJLMNQRTVXZ"
_MAX_TABLES = 3
_MIN_QUESTIONS, _MAX_QUESTIONS = 2, 4
_COMBINED = ("combined", "balance", "overall", "spread", "joint")
_OPERATIONS = {"+": "plus", "-": "minus"}
_NUMERIC = frozenset({"count_in_group", "total", "group_total", "count_above", "above_total", "group_count_above"})
"""Questions whose answer is one whole number (a calculator can combine two of them)."""
_ROLES = {"id": "its id column", "group": "its group column", "number": "its number column"}


def _top(rows: list[dict[str, Any]], t: Table, n: int, reverse: bool) -> list[dict[str, Any]]:
    return [
        {t.id: r[t.id], t.number: r[t.number]} for r in sorted(rows, key=lambda r: r[t.number], reverse=reverse)[:n]
    ]


def _in_group(t: Table) -> dict[str, Any]:
    return {"op": "filter", "field": t.group, "eq": ref(INPUT, "group")}


_MORE = (
    Question(
        "count_above",
        "how many rows have {number} greater than the input `threshold`",
        lambda t: [{"op": "filter", "field": t.number, "gt": ref(INPUT, "threshold")}, {"op": "count"}],
        lambda t, rows, p: sum(1 for r in rows if r[t.number] > p["threshold"]),
    ),
    Question(
        "below",
        "the {id} of every row whose {number} is less than the input `threshold`, in table order",
        lambda t: [
            {"op": "filter", "field": t.number, "lt": ref(INPUT, "threshold")},
            {"op": "pick", "fields": [t.id]},
        ],
        lambda t, rows, p: [{t.id: r[t.id]} for r in rows if r[t.number] < p["threshold"]],
    ),
    Question(
        "bottom",
        "the input `n` rows with the smallest {number} ({id} and {number}, smallest first, ties in table order)",
        lambda t: [
            {"op": "sort", "key": t.number},
            {"op": "limit", "n": ref(INPUT, "n")},
            {"op": "pick", "fields": [t.id, t.number]},
        ],
        lambda t, rows, p: _top(rows, t, p["n"], reverse=False),
    ),
    Question(
        "group_top",
        "the input `n` rows whose {group} is the input `group` with the largest {number} ({id} and "
        "{number}, largest first, ties in table order)",
        lambda t: [
            _in_group(t),
            {"op": "sort", "key": t.number, "reverse": True},
            {"op": "limit", "n": ref(INPUT, "n")},
            {"op": "pick", "fields": [t.id, t.number]},
        ],
        lambda t, rows, p: _top([r for r in rows if r[t.group] == p["group"]], t, p["n"], reverse=True),
    ),
    Question(
        "group_max",
        "the largest {number} among the rows whose {group} is the input `group`, as a list of one "
        "object with {number} (empty when no row has that {group})",
        lambda t: [
            _in_group(t),
            {"op": "sort", "key": t.number, "reverse": True},
            {"op": "limit", "n": 1},
            {"op": "pick", "fields": [t.number]},
        ],
        lambda t, rows, p: [
            {t.number: r[t.number]}
            for r in sorted((r for r in rows if r[t.group] == p["group"]), key=lambda r: r[t.number], reverse=True)[:1]
        ],
    ),
    Question(
        "above_total",
        "the sum of {number} over the rows whose {number} is greater than the input `threshold`",
        lambda t: [
            {"op": "filter", "field": t.number, "gt": ref(INPUT, "threshold")},
            {"op": "sum", "field": t.number},
        ],
        lambda t, rows, p: sum(r[t.number] for r in rows if r[t.number] > p["threshold"]),
    ),
    Question(
        "group_ids",
        "the {id} of every row whose {group} is the input `group`, in table order",
        lambda t: [_in_group(t), {"op": "pick", "fields": [t.id]}],
        lambda t, rows, p: [{t.id: r[t.id]} for r in rows if r[t.group] == p["group"]],
    ),
    Question(
        "group_count_above",
        "how many rows whose {group} is the input `group` have {number} greater than the input `threshold`",
        lambda t: [_in_group(t), {"op": "filter", "field": t.number, "gt": ref(INPUT, "threshold")}, {"op": "count"}],
        lambda t, rows, p: sum(1 for r in rows if r[t.group] == p["group"] and r[t.number] > p["threshold"]),
    ),
    Question(
        "groups_seen",
        "each {group} that occurs, once, in order of first appearance (a list of objects with {group})",
        lambda t: [{"op": "pick", "fields": [t.group]}, {"op": "unique"}],
        lambda t, rows, p: [{t.group: g} for g in dict.fromkeys(r[t.group] for r in rows)],
    ),
)

CATALOGUE: tuple[Question, ...] = (*QUESTIONS, *_MORE)
"""Every question the grammar asks: the curated six and the compositions above."""


@dataclass(frozen=True, slots=True)
class Asked:
    """One question of one table, under its key in the answer."""

    key: str
    table: int
    question: Question


@dataclass(frozen=True, slots=True)
class Combined:
    """A figure that is two numeric answers (by key) added or subtracted."""

    key: str
    op: str
    a: str
    b: str


def _tables(draw: Draw, k: int) -> list[Table]:
    """``k`` tables of distinct names (and fields), one group vocabulary and number range."""
    low, high = draw.choice(_RANGES)
    groups, prefixes = draw.choice(_GROUP_VALUES), draw.sample(_PREFIXES, k)
    return [
        Table(name, draw.choice(_IDS), draw.choice(_GROUPS), draw.choice(_NUMBERS), groups, prefix, low, high)
        for name, prefix in zip(draw.sample(_TABLES, k), prefixes)
    ]


def _asked(draw: Draw, tables: list[Table]) -> list[Asked]:
    """Two to four questions (three of three tables: a search over three tables for a
    fourth answer runs past the reference planner's budget), every table asked at least
    once, one of them beyond the curated six."""
    k = len(tables)
    count = draw.int(max(k, _MIN_QUESTIONS), _MAX_QUESTIONS if k < _MAX_TABLES else k)
    owners = draw.shuffled([*range(k), *(draw.below(k) for _ in range(count - k))])
    pairs: dict[tuple[int, str], Question] = {}
    for n, owner in enumerate(owners):
        pool = _MORE if n == 0 else CATALOGUE
        for question in draw.shuffled(pool):
            if (owner, question.name) not in pairs:
                pairs[(owner, question.name)] = question
                break
    return [
        Asked(name if k == 1 else f"{tables[owner].name}_{name}", owner, question)
        for (owner, name), question in pairs.items()
    ]


def _combined(draw: Draw, asked: list[Asked]) -> Combined | None:
    numeric = [a.key for a in asked if a.question.name in _NUMERIC]
    if len(numeric) < 2 or draw.below(3):
        return None
    a, b = draw.sample(numeric, 2)
    return Combined(draw.choice(_COMBINED), draw.choice(tuple(_OPERATIONS)), a, b)


def _plus_minus(op: str, a: int, b: int) -> int:
    return a + b if op == "+" else a - b


def _answers(
    tables: list[Table],
    asked: list[Asked],
    combined: Combined | None,
    rows: list[list[dict[str, Any]]],
    params: dict[str, Any],
) -> dict[str, Any]:
    out = {a.key: a.question.answer(tables[a.table], rows[a.table], params) for a in asked}
    if combined is not None:
        out[combined.key] = _plus_minus(combined.op, out[combined.a], out[combined.b])
    return out


def _csv(draw: Draw, table: Table, rows: list[dict[str, Any]]) -> str:
    """The table as CSV, its columns in an order drawn per instance: a plan finds them by
    name, never by position."""
    columns = draw.shuffled([table.id, table.group, table.number])
    return "\n".join([",".join(columns), *(",".join(str(r[c]) for c in columns) for r in rows)]) + "\n"


def _generator(tables: list[Table], asked: list[Asked], combined: Combined | None):
    def generate(draw: Draw) -> tuple[dict[str, Any], ...]:
        rows = [_rows(table, draw) for table in tables]
        first = tables[0]
        params = {"group": draw.choice(first.groups), "threshold": draw.int(first.low, first.high), "n": draw.int(2, 4)}
        held = [held_id(draw, "t") for _ in tables]
        inputs = {**{t.name: h for t, h in zip(tables, held)}, **params}
        expected = _answers(tables, asked, combined, rows, params)
        return inputs, {"expected_output": expected}, {h: _csv(draw, t, r) for h, t, r in zip(held, tables, rows)}

    return generate


def _fields(table: Table, named: bool) -> dict[str, str]:
    return {"id": table.id, "group": table.group, "number": table.number} if named else _ROLES


def _description(tables: list[Table], asked: list[Asked], combined: Combined | None, named: bool) -> str:
    held = "; ".join(
        f"`{t.name}` names {t.a_table}" + (f" ({t.id}, {t.group}, {t.number})" if named else "") for t in tables
    )
    schema = (
        ""
        if named
        else (" Each table has three columns, an id, a group and a number; their names are found by reading it.")
    )
    parts = [
        f"`{a.key}`: of the `{tables[a.table].name}` table, "
        f"{a.question.wording.format(**_fields(tables[a.table], named))}"
        for a in asked
    ]
    if combined is not None:
        parts.append(f"`{combined.key}`: `{combined.a}` {_OPERATIONS[combined.op]} `{combined.b}`")
    return (
        f"Held by data subnets, the input {held}.{schema} The inputs `group`, `threshold` and `n` apply to "
        f"every table. Answer with one JSON object: {'; '.join(parts)}."
    )


def _schema(tables: list[Table], named: bool) -> dict[str, Any]:
    header = (
        (lambda t: f"{t.id},{t.group},{t.number}") if named else (lambda t: "three columns: read it for their names")
    )
    return {
        "type": "object",
        "required": [*(t.name for t in tables), "group", "threshold", "n"],
        "properties": {
            **{t.name: table_schema(header(t)) for t in tables},
            "group": {"type": "string", "enum": list(tables[0].groups)},
            "threshold": {"type": "integer"},
            "n": {"type": "integer", "minimum": 1},
        },
    }


def _steps(tables: list[Table], asked: list[Asked], combined: Combined | None) -> list:
    reads = [f"read_{t.name}" for t in tables]
    steps = [step(read, "csv_to_json", table=ref(INPUT, t.name), numeric=True) for read, t in zip(reads, tables)]
    steps += [
        step(
            a.key,
            "json_transform",
            data=ref(reads[a.table], "artifacts", "metadata", "result"),
            ops=a.question.ops(tables[a.table]),
        )
        for a in asked
    ]
    keys = [a.key for a in asked]
    if combined is not None:
        steps.append(
            step(
                combined.key,
                "calculator",
                expression=f"{ref(combined.a, 'text')} {combined.op} {ref(combined.b, 'text')}",
            )
        )
        keys.append(combined.key)
    answer = "{{" + ", ".join(f'"{key}": {{{key}}}' for key in keys) + "}}"
    steps.append(
        step("answer", "text_transform", op="template", text=answer, values={key: ref(key, "text") for key in keys})
    )
    return steps


_UNLIMITED = {"n": 10**9}
"""Parameters that lift a question's ``limit``: the same pipeline without it."""


def _answer(question: Question, table: Table, name: str, override: dict[str, Any] | None = None):
    def answer(instance: Instance) -> Any:
        params = {k: instance.inputs[k] for k in ("group", "threshold", "n")} | (override or {})
        return question.answer(table, held_rows(instance, name), params)

    return answer


_FILTERS: dict[str, Callable[[Table, dict[str, Any], dict[str, Any]], bool]] = {
    "in the group": lambda t, r, p: r[t.group] == p["group"],
    "above the threshold": lambda t, r, p: r[t.number] > p["threshold"],
    "below the threshold": lambda t, r, p: r[t.number] < p["threshold"],
    "in the group and above": lambda t, r, p: r[t.group] == p["group"] and r[t.number] > p["threshold"],
}


def _head_count(table: Table, keep: str, passes: Callable[[Table, dict[str, Any], dict[str, Any]], bool]):
    """How many of the table's first rows (one, or the input ``n``) pass a filter: a small
    count of the examples that such a program fits by chance is no answer."""

    def answer(instance: Instance) -> Any:
        params = {k: instance.inputs[k] for k in ("group", "threshold", "n")}
        head = held_rows(instance, table.name)[: 1 if keep == "1" else params["n"]]
        return sum(1 for row in head if passes(table, row, params))

    return answer


def _neighbours(tables: list[Table], asked: list[Asked], combined: Combined | None) -> dict[str, dict[str, Callable]]:
    found: dict[str, dict[str, Callable]] = {}
    for a in asked:
        table = tables[a.table]
        found[a.key] = {
            f"{t.name}/{other.name}": _answer(other, t, t.name)
            for i, t in enumerate(tables)
            for other in CATALOGUE
            if not (i == a.table and other is a.question)
        }
        found[a.key][f"{a.question.name} without its limit"] = _answer(a.question, table, table.name, _UNLIMITED)
        if a.question.name in _NUMERIC:
            found[a.key] |= {
                f"{t.name}/first {keep} {name}": _head_count(t, keep, passes)
                for t in tables
                for keep in ("1", "n")
                for name, passes in _FILTERS.items()
            }
    if combined is not None:
        answers = {a.key: _answer(a.question, tables[a.table], tables[a.table].name) for a in asked}
        x, y = answers[combined.a], answers[combined.b]
        other = "-" if combined.op == "+" else "+"
        found[combined.key] = {
            "other operation": lambda i: _plus_minus(other, x(i), y(i)),
            "swapped": lambda i: _plus_minus(combined.op, y(i), x(i)),
            "first alone": x,
            "second alone": y,
        }
    return found


def draw_data(draw: Draw, index: int) -> Production:
    """One to three tables, two to four questions of :data:`CATALOGUE` over them, maybe a
    combined figure; the columns named in the description or left to be read."""
    tables = _tables(draw, draw.int(1, _MAX_TABLES))
    asked = _asked(draw, tables)
    combined = _combined(draw, asked)
    named = draw.below(2) == 0
    family = make_family(
        index,
        f"dt_{'_'.join(t.name for t in tables)}",
        "data_transform",
        _description(tables, asked, combined, named),
        _schema(tables, named),
        _steps(tables, asked, combined),
        _generator(tables, asked, combined),
    )
    return Production(family, _neighbours(tables, asked, combined))
