"""``data_transform`` families: a held table, the questions asked of it, exact answers.

Each instance is a fresh CSV (rows, categories and numbers drawn per instance) held by a
data subnet under an id the inputs name (``table``), and hidden parameters (which
category, what threshold, how many). The plan reads the table with
``csv_to_json(table=...)`` on a data subnet, answers each question in its own branch of
``json_transform`` ops, and writes the branches into one JSON object on a text subnet;
the reference is that object, computed here in plain Python from the drawn rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protocol.dataref import INPUT, ref

from .family import Family
from .held import held_id, table_schema
from .profiles import make_family, step
from .seed import Draw

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    id: str
    group: str
    number: str
    groups: tuple[str, ...]
    prefix: str
    low: int
    high: int

    @property
    def a_table(self) -> str:
        """``a sales table``, ``an inventory table``: as a description names it."""
        return f"{'an' if self.name[0] in 'aeiou' else 'a'} {self.name} table"


@dataclass(frozen=True, slots=True)
class Question:
    """One branch: the ops the plan runs, and the same answer computed in Python."""

    name: str
    wording: str
    ops: Callable[[Table], list[dict[str, Any]]]
    answer: Callable[[Table, list[Row], dict[str, Any]], Any]


TABLES = (
    Table("sales", "order", "region", "units", ("north", "south", "east", "west"), "S", 1, 40),
    Table("staff", "badge", "dept", "salary", ("eng", "ops", "research", "sales"), "E", 40_000, 160_000),
    Table("weather", "reading", "city", "rain_mm", ("oslo", "lima", "pune", "kyiv"), "W", 0, 60),
    Table("inventory", "sku", "warehouse", "stock", ("lyon", "porto", "gdansk"), "K", 0, 500),
    Table("grades", "entry", "course", "score", ("math", "physics", "history", "art"), "G", 30, 100),
    Table("flights", "flight", "origin", "minutes_late", ("OSL", "LIS", "AMS", "MAD"), "F", 0, 180),
    Table("orders", "invoice", "channel", "amount", ("web", "store", "phone"), "I", 5, 900),
    Table("servers", "host", "zone", "cpu_pct", ("eu1", "eu2", "us1", "ap1"), "H", 1, 99),
    Table("books", "isbn", "genre", "pages", ("novel", "poetry", "essay", "drama"), "B", 60, 900),
    Table("sensors", "probe", "site", "reading", ("dock", "roof", "yard", "hall"), "P", -20, 45),
)

_DATA = ref("rows", "artifacts", "metadata", "result")

QUESTIONS = (
    Question(
        "count_in_group",
        "how many rows have {group} equal to the input `group`",
        lambda t: [{"op": "filter", "field": t.group, "eq": ref(INPUT, "group")}, {"op": "count"}],
        lambda t, rows, p: sum(1 for r in rows if r[t.group] == p["group"]),
    ),
    Question(
        "total",
        "the sum of {number} over all rows",
        lambda t: [{"op": "sum", "field": t.number}],
        lambda t, rows, p: sum(r[t.number] for r in rows),
    ),
    Question(
        "top",
        "the input `n` rows with the largest {number} ({id} and {number}, largest first, ties in table order)",
        lambda t: [
            {"op": "sort", "key": t.number, "reverse": True},
            {"op": "limit", "n": ref(INPUT, "n")},
            {"op": "pick", "fields": [t.id, t.number]},
        ],
        lambda t, rows, p: [
            {t.id: r[t.id], t.number: r[t.number]}
            for r in sorted(rows, key=lambda r: r[t.number], reverse=True)[: p["n"]]
        ],
    ),
    Question(
        "above",
        "the {id} of every row whose {number} is greater than the input `threshold`, in table order",
        lambda t: [
            {"op": "filter", "field": t.number, "gt": ref(INPUT, "threshold")},
            {"op": "pick", "fields": [t.id]},
        ],
        lambda t, rows, p: [{t.id: r[t.id]} for r in rows if r[t.number] > p["threshold"]],
    ),
    Question(
        "per_group",
        "the number of rows per {group}",
        lambda t: [{"op": "group_count", "field": t.group}],
        lambda t, rows, p: dict(sorted(Counter(r[t.group] for r in rows).items())),
    ),
    Question(
        "group_total",
        "the sum of {number} over the rows whose {group} is the input `group`",
        lambda t: [{"op": "filter", "field": t.group, "eq": ref(INPUT, "group")}, {"op": "sum", "field": t.number}],
        lambda t, rows, p: sum(r[t.number] for r in rows if r[t.group] == p["group"]),
    ),
)


def _rows(table: Table, draw: Draw) -> list[Row]:
    ids = draw.sample(range(100, 1000), draw.int(8, 14))
    return [
        {
            table.id: f"{table.prefix}{i}",
            table.group: draw.choice(table.groups),
            table.number: draw.int(table.low, table.high),
        }
        for i in ids
    ]


def _csv(table: Table, rows: list[Row]) -> str:
    lines = [f"{table.id},{table.group},{table.number}"]
    lines += [f"{r[table.id]},{r[table.group]},{r[table.number]}" for r in rows]
    return "\n".join(lines) + "\n"


def _schema(table: Table) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["table", "group", "threshold", "n"],
        "properties": {
            "table": table_schema(f"{table.id},{table.group},{table.number}"),
            "group": {"type": "string", "enum": list(table.groups)},
            "threshold": {"type": "integer"},
            "n": {"type": "integer", "minimum": 1},
        },
    }


def _family(index: int, table: Table, questions: tuple[Question, ...]) -> Family:
    def generate(draw: Draw) -> tuple[dict[str, Any], ...]:
        rows = _rows(table, draw)
        params = {"group": draw.choice(table.groups), "threshold": draw.int(table.low, table.high), "n": draw.int(2, 4)}
        expected = {q.name: q.answer(table, rows, params) for q in questions}
        held = held_id(draw, "t")
        return {"table": held, **params}, {"expected_output": expected}, {held: _csv(table, rows)}

    fields = {"id": table.id, "group": table.group, "number": table.number}
    asked = "; ".join(f"`{q.name}`: {q.wording.format(**fields)}" for q in questions)
    description = (
        f"The input `table` names {table.a_table} ({table.id}, {table.group}, {table.number}) that a data "
        f"subnet holds. Answer with one JSON object: {asked}."
    )
    steps = [step("rows", "csv_to_json", table=ref(INPUT, "table"), numeric=True)]
    steps += [step(q.name, "json_transform", data=_DATA, ops=q.ops(table)) for q in questions]
    answer = "{{" + ", ".join(f'"{q.name}": {{{q.name}}}' for q in questions) + "}}"
    steps.append(
        step(
            "answer",
            "text_transform",
            op="template",
            text=answer,
            values={q.name: ref(q.name, "text") for q in questions},
        )
    )
    return make_family(index, f"dt_{table.name}", "data_transform", description, _schema(table), steps, generate)


def families(start: int) -> list[Family]:
    """One family per table; each asks three of the questions, rotating through them."""
    out = []
    for offset, table in enumerate(TABLES):
        chosen = tuple(QUESTIONS[(offset + k * 2) % len(QUESTIONS)] for k in range(3))
        out.append(_family(start + offset, table, chosen))
    return out
