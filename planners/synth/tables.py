"""Tables: where records come from, and the ``json_transform`` pipelines over them.

A table is a CSV given inline or held by id (read with ``csv_to_json`` on a data
subnet) or a list of records among the inputs. Pipelines are enumerated breadth first
(shortest first) from the records: filter (a field against an input of its type), sort
(by a field, either way), limit (to an input count), pick (one or two fields), and the
reductions count, sum and group_count. Two pipelines that give the same values on every
example are one (observational equivalence): only the first, shortest, is kept and
extended. Ops are the ``json_transform`` tool's own op models, applied in this process.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from typing import Any

from protocol.dataref import INPUT, ref
from subnets.base import ToolError
from subnets.transform import CountOp, FilterOp, GroupCountOp, LimitOp, PickOp, SortOp, SumOp, UniqueOp

from .world import Fragment, Program, World, canonical, run_steps

__all__ = ["pipelines", "tables"]

_DEPTH = 3
_MAX_STATES = 4000
_TERMINAL = frozenset({"count", "sum", "group_count"})

Scalars = list[tuple[str, tuple[Any, ...]]]
"""Input refs of scalar inputs and their value in every example."""


def tables(world: World, program: Program) -> list[Fragment]:
    """Every table the examples' inputs give, parsed as the tools parse it."""
    found = []
    for name, values in _top_inputs(world):
        if all(isinstance(v, list) and v and all(isinstance(r, dict) for r in v) for v in values):
            found.append(Fragment(values, ref(INPUT, name), ref(INPUT, name)))
            continue
        param = _csv_param(world, values)
        if param is None or not world.offers("csv_to_json"):
            continue
        step = program.add("csv_to_json", {param: ref(INPUT, name), "numeric": True})
        parsed = _parsed(program, step, world)
        if parsed is not None:
            found.append(Fragment(parsed, ref(step, "artifacts", "metadata", "result"), ref(step, "text"), 1))
    return found


def _top_inputs(world: World) -> Iterator[tuple[str, tuple[Any, ...]]]:
    for name in world.examples[0].inputs if world.examples else ():
        values = world.column([name])
        if values is not None:
            yield name, values


def _csv_param(world: World, values: tuple[Any, ...]) -> str | None:
    """``table`` when every value is the id of a held CSV, ``csv`` when it is CSV text."""
    if all(isinstance(v, str) and isinstance(ex.holdings.get(v), str) for v, ex in zip(values, world.examples)):
        return "table"
    if all(isinstance(v, str) and "\n" in v and "," in v.partition("\n")[0] for v in values):
        return "csv"
    return None


def _parsed(program: Program, step: str, world: World) -> tuple[Any, ...] | None:
    outputs = run_steps(program.closure(step), world.examples)
    if any(out is None or "result" not in out["artifacts"]["metadata"] for out in outputs):
        return None
    return tuple(
        out["artifacts"]["metadata"]["result"] for out in outputs if out is not None
    )  # none is, as tested above


def scalar_inputs(world: World) -> Scalars:
    """Top-level inputs that are a number or a string in every example (not held ids)."""
    held = {key for ex in world.examples for key in ex.holdings}
    out = []
    for name, values in _top_inputs(world):
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            out.append((ref(INPUT, name), values))
        elif all(isinstance(v, str) and v not in held and len(v) <= 256 for v in values):
            out.append((ref(INPUT, name), values))
    return out


OpSpec = dict[str, Any]


def _candidate_ops(values: tuple[Any, ...], scalars: Scalars) -> Iterator[OpSpec]:
    """Ops that apply to ``values`` (a list of records in every example)."""
    fields = _common_fields(values)
    numeric = [
        f for f in fields if _all_rows(values, f, lambda v: isinstance(v, (int, float)) and not isinstance(v, bool))
    ]
    texts = [f for f in fields if _all_rows(values, f, lambda v: isinstance(v, str))]
    numbers = [(r, v) for r, v in scalars if all(isinstance(x, (int, float)) for x in v)]
    words = [(r, v) for r, v in scalars if all(isinstance(x, str) for x in v)]
    yield {"op": "count"}
    for field in numeric:
        yield {"op": "sum", "field": field}
    for field in texts:
        yield {"op": "group_count", "field": field}
    for field in texts:
        for name, _ in words:
            yield {"op": "filter", "field": field, "eq": name}
    for field in numeric:
        for reverse in (True, False):
            yield {"op": "sort", "key": field, "reverse": reverse}
    for name, column in numbers:  # a count, where it fits the rows of some example
        if all(isinstance(x, int) and x >= 0 for x in column) and any(x <= len(v) for x, v in zip(column, values)):
            yield {"op": "limit", "n": name}
    yield {"op": "limit", "n": 1}
    for field in numeric:
        for name, _ in numbers:
            yield {"op": "filter", "field": field, "gt": name}
            yield {"op": "filter", "field": field, "lt": name}
    for size in (1, 2):
        for chosen in itertools.combinations(fields, size):
            if len(chosen) < len(fields):
                yield {"op": "pick", "fields": list(chosen)}
    yield {"op": "unique"}


def _common_fields(values: tuple[Any, ...]) -> list[str]:
    """Fields every record has, in every example (an example may have no records left)."""
    if not all(isinstance(v, list) and all(isinstance(r, dict) for r in v) for v in values):
        return []
    rows = [row for v in values for row in v]
    return [f for f in rows[0] if all(f in row for row in rows)] if rows else []


def _all_rows(values: tuple[Any, ...], field: str, test: Callable[[Any], bool]) -> bool:
    return all(test(row[field]) for v in values for row in v)


_MODELS: dict[str, type[CountOp | SumOp | GroupCountOp | FilterOp | SortOp | LimitOp | PickOp | UniqueOp]] = {
    "count": CountOp,
    "sum": SumOp,
    "group_count": GroupCountOp,
    "filter": FilterOp,
    "sort": SortOp,
    "limit": LimitOp,
    "pick": PickOp,
    "unique": UniqueOp,
}


def _apply(spec: OpSpec, value: Any, inputs: dict[str, Any]) -> Any:
    concrete = {key: inputs.get(item, item) if isinstance(item, str) else item for key, item in spec.items()}
    return _MODELS[spec["op"]].model_validate(concrete).apply(value)


def pipelines(world: World, program: Program, table: Fragment, wanted: dict[str, str]) -> dict[str, Fragment]:
    """For each wanted value (its :attr:`Fragment.key` → a name), the shortest pipeline
    over ``table`` that gives it in every example, as a ``json_transform`` step; one that
    reads every input the description names for the key comes before one that does not."""
    scalars = scalar_inputs(world)
    per_example = [{name: column[i] for name, column in scalars} for i in range(len(world.examples))]
    found: dict[str, Fragment] = {}
    wanted_values = {name: tuple(json.loads(key)) for key, name in wanted.items()}
    picks = _picks(wanted_values)
    mentions = {name: world.mentions(name) for name in wanted_values}
    named = set().union(*mentions.values()) if mentions else set()
    fallback: dict[str, list[OpSpec]] = {}
    seen = {table.key + "|"}
    frontier: list[tuple[tuple[Any, ...], list[OpSpec]]] = [(table.values, [])]
    for _ in range(_DEPTH):
        grown = []
        for values, ops in frontier:
            for spec in _candidate_ops(values, scalars):
                world.budget.check()
                try:
                    out = tuple(_apply(spec, v, inputs) for v, inputs in zip(values, per_example))
                except (ToolError, ValueError, TypeError, KeyError):
                    continue
                if spec["op"] == "filter" and out == values:
                    continue  # a filter that keeps every row in every example says nothing
                chain = [*ops, spec]
                # equal values are one state, unless they read other inputs the description names
                state = Fragment(out, "", "").key + "|" + ",".join(sorted(m for m in named if m in json.dumps(chain)))
                if state in seen:
                    continue
                seen.add(state)
                for name, last in _matches(out, wanted, picks):
                    reads = json.dumps(chain)
                    if name in found:
                        continue
                    if all(mention in reads for mention in mentions[name]):
                        found[name] = _step(program, table, chain + last, wanted_values[name])
                    elif name not in fallback:
                        fallback[name] = chain + last
                if spec["op"] not in _TERMINAL and len(seen) < _MAX_STATES:
                    grown.append((out, chain))
        if len(found) == len(set(wanted.values())):
            break
        frontier = grown
    for name, chain in fallback.items():
        if name not in found:
            found[name] = _step(program, table, chain, wanted_values[name])
    return found


def _picks(wanted: dict[str, tuple[Any, ...]]) -> list[list[str]]:
    """The field lists of wanted lists of records: a pipeline ending in that ``pick`` is
    compared as soon as the rest of it is built (a last step the search need not take)."""
    out = []
    for values in wanted.values():
        rows = [row for v in values if isinstance(v, list) for row in v if isinstance(row, dict)]
        if rows and all(isinstance(v, list) for v in values) and all(list(row) == list(rows[0]) for row in rows):
            out.append(sorted(rows[0]))
    return [list(fields) for fields in dict.fromkeys(tuple(f) for f in out)]


def _matches(
    out: tuple[Any, ...], wanted: dict[str, str], picks: list[list[str]]
) -> Iterator[tuple[str, list[OpSpec]]]:
    """The wanted values ``out`` is, as it is or after one of ``picks``."""
    name = wanted.get(canonical(list(out)))
    if name is not None:
        yield name, []
    if not picks or not all(isinstance(v, list) and all(isinstance(r, dict) for r in v) for v in out):
        return
    for fields in picks:
        picked = [[{k: row[k] for k in fields if k in row} for row in v] for v in out]
        name = wanted.get(canonical(picked))
        if name is not None:
            yield name, [{"op": "pick", "fields": fields}]


def _step(program: Program, table: Fragment, ops: list[OpSpec], values: tuple[Any, ...]) -> Fragment:
    step = program.add("json_transform", {"data": table.ref, "ops": ops})
    return Fragment(values, ref(step, "artifacts", "metadata", "result"), ref(step, "text"), table.steps + 1)
