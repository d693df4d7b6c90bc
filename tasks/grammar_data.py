"""The data productions of the family grammar: a drawn table schema and a drawn set of
questions, each parse → filter/sort/group/aggregate → assemble.

The schema (table name, id, group and number fields, the group values, a number range)
comes from word lists; the questions from the curated six (``data_families.QUESTIONS``)
and the compositions below (filter-then-top, group-then-max, two filters, ...). The
family is built by the curated builder (``data_families._family``), so it reads its
table the way every data family does. A question's neighbours are every other question
of the catalogue, asked of the same table.
"""

from __future__ import annotations

from typing import Any

from protocol.dataref import INPUT, ref

from .data_families import QUESTIONS, Question, Table, _family
from .family import Instance
from .grammar import Production, held_rows
from .seed import Draw

__all__ = ["CATALOGUE", "draw_data"]

_TABLES = ("parcels", "tickets", "rentals", "visits", "repairs", "loans", "shipments", "matches", "patients",
           "harvests", "concerts", "trips")
_IDS = ("code", "ref", "tag", "serial", "label", "ticket_no")
_GROUPS = ("area", "team", "branch", "category", "season", "depot", "carrier", "district")
_GROUP_VALUES = (("red", "blue", "green", "amber"), ("alpha", "beta", "gamma", "delta"),
                 ("spring", "summer", "autumn", "winter"), ("ash", "oak", "elm", "yew"), ("tin", "zinc", "iron"),
                 ("bay", "cove", "fjord", "strait"), ("north", "south", "east", "west"))
_NUMBERS = ("weight_kg", "count", "price", "minutes", "distance_km", "points", "load", "volume_l")
_RANGES = ((0, 50), (1, 99), (10, 500), (100, 2000), (-40, 40), (1000, 90000))
_PREFIXES = "ABCDJLMNQRTVXZ"
_QUESTIONS = 3


def _top(rows: list[dict[str, Any]], t: Table, n: int, reverse: bool) -> list[dict[str, Any]]:
    return [{t.id: r[t.id], t.number: r[t.number]} for r in sorted(rows, key=lambda r: r[t.number], reverse=reverse)[:n]]


def _in_group(t: Table) -> dict[str, Any]:
    return {"op": "filter", "field": t.group, "eq": ref(INPUT, "group")}


_MORE = (
    Question("count_above", "how many rows have {number} greater than the input `threshold`",
             lambda t: [{"op": "filter", "field": t.number, "gt": ref(INPUT, "threshold")}, {"op": "count"}],
             lambda t, rows, p: sum(1 for r in rows if r[t.number] > p["threshold"])),
    Question("below", "the {id} of every row whose {number} is less than the input `threshold`, in table order",
             lambda t: [{"op": "filter", "field": t.number, "lt": ref(INPUT, "threshold")}, {"op": "pick", "fields": [t.id]}],
             lambda t, rows, p: [{t.id: r[t.id]} for r in rows if r[t.number] < p["threshold"]]),
    Question("bottom", "the input `n` rows with the smallest {number} ({id} and {number}, smallest first, ties in "
             "table order)",
             lambda t: [{"op": "sort", "key": t.number}, {"op": "limit", "n": ref(INPUT, "n")},
                        {"op": "pick", "fields": [t.id, t.number]}],
             lambda t, rows, p: _top(rows, t, p["n"], reverse=False)),
    Question("group_top", "the input `n` rows whose {group} is the input `group` with the largest {number} ({id} and "
             "{number}, largest first, ties in table order)",
             lambda t: [_in_group(t), {"op": "sort", "key": t.number, "reverse": True},
                        {"op": "limit", "n": ref(INPUT, "n")}, {"op": "pick", "fields": [t.id, t.number]}],
             lambda t, rows, p: _top([r for r in rows if r[t.group] == p["group"]], t, p["n"], reverse=True)),
    Question("group_max", "the largest {number} among the rows whose {group} is the input `group`, as a list of one "
             "object with {number} (empty when no row has that {group})",
             lambda t: [_in_group(t), {"op": "sort", "key": t.number, "reverse": True}, {"op": "limit", "n": 1},
                        {"op": "pick", "fields": [t.number]}],
             lambda t, rows, p: [{t.number: r[t.number]} for r in sorted(
                 (r for r in rows if r[t.group] == p["group"]), key=lambda r: r[t.number], reverse=True)[:1]]),
    Question("above_total", "the sum of {number} over the rows whose {number} is greater than the input `threshold`",
             lambda t: [{"op": "filter", "field": t.number, "gt": ref(INPUT, "threshold")}, {"op": "sum", "field": t.number}],
             lambda t, rows, p: sum(r[t.number] for r in rows if r[t.number] > p["threshold"])),
    Question("group_ids", "the {id} of every row whose {group} is the input `group`, in table order",
             lambda t: [_in_group(t), {"op": "pick", "fields": [t.id]}],
             lambda t, rows, p: [{t.id: r[t.id]} for r in rows if r[t.group] == p["group"]]),
    Question("group_count_above", "how many rows whose {group} is the input `group` have {number} greater than the "
             "input `threshold`",
             lambda t: [_in_group(t), {"op": "filter", "field": t.number, "gt": ref(INPUT, "threshold")}, {"op": "count"}],
             lambda t, rows, p: sum(1 for r in rows if r[t.group] == p["group"] and r[t.number] > p["threshold"])),
    Question("groups_seen", "each {group} that occurs, once, in order of first appearance (a list of objects with "
             "{group})",
             lambda t: [{"op": "pick", "fields": [t.group]}, {"op": "unique"}],
             lambda t, rows, p: [{t.group: g} for g in dict.fromkeys(r[t.group] for r in rows)]),
)

CATALOGUE: tuple[Question, ...] = (*QUESTIONS, *_MORE)
"""Every question the grammar asks: the curated six and the compositions above."""


def _table(draw: Draw) -> Table:
    low, high = draw.choice(_RANGES)
    return Table(draw.choice(_TABLES), draw.choice(_IDS), draw.choice(_GROUPS), draw.choice(_NUMBERS),
                 draw.choice(_GROUP_VALUES), draw.choice(_PREFIXES), low, high)


def _answer(question: Question, table: Table):
    def answer(instance: Instance) -> Any:
        params = {k: instance.inputs[k] for k in ("group", "threshold", "n")}
        return question.answer(table, held_rows(instance), params)
    return answer


def draw_data(draw: Draw, index: int) -> Production:
    """A table schema and three questions of :data:`CATALOGUE` (as many as a curated
    family asks), at least one of them beyond the curated six."""
    table = _table(draw)
    questions = [draw.choice(_MORE), *draw.sample(CATALOGUE, _QUESTIONS)]
    chosen = tuple(sorted(tuple(dict.fromkeys(questions))[:_QUESTIONS], key=CATALOGUE.index))
    family = _family(index, table, chosen)
    neighbours = {q.name: {other.name: _answer(other, table) for other in CATALOGUE if other is not q}
                  for q in chosen}
    return Production(family, neighbours)
