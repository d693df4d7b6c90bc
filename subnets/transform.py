"""JSON and CSV transforms: ``json_transform``, ``csv_to_json``, ``json_to_csv``.

``json_transform`` applies a pipeline of small ops to a JSON value, each op's
result feeding the next::

    {"data": [...], "ops": [{"op": "filter", "field": "age", "gt": 30},
                            {"op": "sort", "key": "age", "reverse": true},
                            {"op": "pick", "fields": ["name"]}, {"op": "limit", "n": 2}]}

Ops that work on records (``pick``, ``rename``, ``map_field``) accept one object
or a list of objects. Results are emitted as canonical JSON (sorted keys, no
spaces) so equal values always have equal text.
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ._common import (
    BoundedText,
    canonical_json,
    ensure_fits,
    json_output,
    load_json_param,
    make_output,
    parse_params,
    unresolved_held,
)
from .base import ToolContext, ToolError, ToolResult, ToolSpec, run_in_process

MAX_OPS = 64
MAX_CSV_CHARS = 256 * 1024


class _Op(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def apply(self, value: Any) -> Any:
        raise NotImplementedError


def _records(value: Any, op: str, fn: Callable[[dict[str, Any]], Any]) -> Any:
    """Apply ``fn`` to one object, or to each object of a list."""
    if isinstance(value, dict):
        return fn(value)
    if isinstance(value, list) and all(isinstance(item, dict) for item in value):
        return [fn(item) for item in value]
    raise ToolError(f"{op}: expects an object or a list of objects, got {_kind(value)}")


def _items(value: Any, op: str) -> list[Any]:
    if not isinstance(value, list):
        raise ToolError(f"{op}: expects a list, got {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def _field(item: Any, field: str | None) -> Any:
    """``item[field]`` (or the item itself when ``field`` is None); ``KeyError`` if absent."""
    if field is None:
        return item
    if not isinstance(item, dict):
        raise KeyError(field)
    return item[field]


class GetOp(_Op):
    op: Literal["get"]
    path: str | list[str | int]

    def apply(self, value: Any) -> Any:
        steps = self.path if isinstance(self.path, list) else [s for s in self.path.split(".") if s]
        for step in steps:
            value = _step(value, step, self.path)
        return value


def _step(value: Any, step: str | int, path: Any) -> Any:
    if isinstance(value, dict) and str(step) in value:
        return value[str(step)]
    if isinstance(value, list) and re.fullmatch(r"-?\d{1,18}", str(step)) and -len(value) <= int(step) < len(value):
        return value[int(step)]
    raise ToolError(f"get: path {path!r} not found at {step!r}")


class PickOp(_Op):
    op: Literal["pick"]
    fields: list[str] = Field(min_length=1)

    def apply(self, value: Any) -> Any:
        return _records(value, "pick", lambda item: {k: item[k] for k in self.fields if k in item})


class RenameOp(_Op):
    op: Literal["rename"]
    mapping: dict[str, str] = Field(min_length=1)

    def apply(self, value: Any) -> Any:
        return _records(value, "rename", lambda item: {self.mapping.get(k, k): v for k, v in item.items()})


class FilterOp(_Op):
    """Keep list items whose ``field`` passes exactly one test; items lacking it are dropped.

    ``gt``/``lt`` between incomparable types (text vs number) drop the item too.
    """

    op: Literal["filter"]
    field: str | None = None
    eq: Any = None
    ne: Any = None
    gt: Any = None
    lt: Any = None
    contains: Any = None

    @model_validator(mode="after")
    def _one_test(self) -> FilterOp:
        given = [name for name in ("eq", "ne", "gt", "lt", "contains") if name in self.model_fields_set]
        if len(given) != 1:
            raise ValueError("give exactly one of eq, ne, gt, lt, contains")
        return self

    def apply(self, value: Any) -> Any:
        test = next(name for name in ("eq", "ne", "gt", "lt", "contains") if name in self.model_fields_set)
        return [item for item in _items(value, "filter") if self._passes(item, test, getattr(self, test))]

    def _passes(self, item: Any, test: str, expected: Any) -> bool:
        try:
            actual = _field(item, self.field)
            if test == "eq":
                return bool(actual == expected)
            if test == "ne":
                return bool(actual != expected)
            if test == "contains":
                return expected in actual
            if isinstance(actual, bool) or isinstance(expected, bool):
                return False
            return bool(actual > expected if test == "gt" else actual < expected)
        except (KeyError, TypeError):
            return False


class SortOp(_Op):
    op: Literal["sort"]
    key: str | None = None
    reverse: bool = False

    def apply(self, value: Any) -> Any:
        items = _items(value, "sort")
        try:
            return sorted(items, key=lambda item: _field(item, self.key), reverse=self.reverse)
        except KeyError:
            raise ToolError(f"sort: some items have no key {self.key!r}") from None
        except TypeError:
            raise ToolError("sort: values of mixed types cannot be ordered") from None


def _to_int(value: Any) -> int:
    if isinstance(value, str):
        return int(float(value)) if re.fullmatch(r"\s*-?\d+\.\d*\s*", value) else int(value)
    return int(value)


_CONVERSIONS: dict[str, Callable[[Any], Any]] = {
    "upper": lambda v: v.upper(),
    "lower": lambda v: v.lower(),
    "strip": lambda v: v.strip(),
    "int": _to_int,
    "float": float,
    "str": lambda v: v if isinstance(v, str) else canonical_json(v),
}


class MapFieldOp(_Op):
    """Convert ``field`` of each record (or each list item when ``field`` is omitted)
    with ``convert``: upper, lower, strip, int, float or str.

    Records lacking the field are left as they are.
    """

    op: Literal["map_field"]
    field: str | None = None
    convert: Literal["upper", "lower", "strip", "int", "float", "str"]

    def apply(self, value: Any) -> Any:
        convert = _CONVERSIONS[self.convert]
        try:
            if self.field is None:
                return [convert(item) for item in _items(value, "map_field")]
            return _records(value, "map_field", lambda item: self._convert(item, convert))
        except (AttributeError, TypeError, ValueError, OverflowError):
            raise ToolError(f"map_field: cannot apply {self.convert} to every value of {self.field!r}") from None

    def _convert(self, item: dict[str, Any], convert: Callable[[Any], Any]) -> dict[str, Any]:
        if self.field not in item:
            return item
        return {**item, self.field: convert(item[self.field])}


class GroupCountOp(_Op):
    """``{value: count}`` over the list; non-string values are keyed by their JSON."""

    op: Literal["group_count"]
    field: str | None = None

    def apply(self, value: Any) -> Any:
        counts: Counter[str] = Counter()
        for item in _items(value, "group_count"):
            try:
                key = _field(item, self.field)
            except KeyError:
                continue
            counts[key if isinstance(key, str) else canonical_json(key)] += 1
        return dict(sorted(counts.items()))


class SumOp(_Op):
    """Sum of the list's numbers, or of ``field`` over its records (records lacking it skipped)."""

    op: Literal["sum"]
    field: str | None = None

    def apply(self, value: Any) -> Any:
        numbers = []
        for item in _items(value, "sum"):
            try:
                number = _field(item, self.field)
            except KeyError:
                continue
            if isinstance(number, bool) or not isinstance(number, (int, float)):
                raise ToolError(f"sum: {canonical_json(number)[:60]} is not a number")
            numbers.append(number)
        return sum(numbers)


class UniqueOp(_Op):
    """Drop repeated items (equal as JSON), keeping the first of each."""

    op: Literal["unique"]

    def apply(self, value: Any) -> Any:
        seen: set[str] = set()
        kept = []
        for item in _items(value, "unique"):
            key = canonical_json(item)
            if key not in seen:
                seen.add(key)
                kept.append(item)
        return kept


class FlattenOp(_Op):
    """One level: ``[[1, 2], 3, [4]]`` → ``[1, 2, 3, 4]``."""

    op: Literal["flatten"]

    def apply(self, value: Any) -> Any:
        flat: list[Any] = []
        for item in _items(value, "flatten"):
            flat.extend(item if isinstance(item, list) else [item])
        return flat


class LimitOp(_Op):
    op: Literal["limit"]
    n: int = Field(ge=0)

    def apply(self, value: Any) -> Any:
        return _items(value, "limit")[: self.n]


class CountOp(_Op):
    op: Literal["count"]

    def apply(self, value: Any) -> Any:
        if not isinstance(value, (list, dict)):
            raise ToolError(f"count: expects a list or an object, got {_kind(value)}")
        return len(value)


Op = Annotated[
    GetOp
    | PickOp
    | RenameOp
    | FilterOp
    | SortOp
    | MapFieldOp
    | GroupCountOp
    | SumOp
    | UniqueOp
    | FlattenOp
    | LimitOp
    | CountOp,
    Field(discriminator="op"),
]


class JsonTransformParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    data: Any
    ops: list[Op] = Field(default_factory=list, max_length=MAX_OPS)


def _json_transform(params: dict[str, Any], ctx: ToolContext) -> ToolResult:
    p = parse_params(JsonTransformParams, params)
    value = load_json_param(p.data, "data")
    for op in p.ops:
        value = op.apply(value)
    return ToolResult(json_output(value))


# --- CSV ---------------------------------------------------------------------------

_INT = re.compile(r"-?\d{1,18}")
_FLOAT = re.compile(r"-?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d{1,3})?")


class CsvToJsonParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    csv: str | None = Field(default=None, max_length=MAX_CSV_CHARS)
    table: str | None = Field(default=None, max_length=128)
    """A held table's id: only the validator running the task resolves it to ``csv``."""
    delimiter: str = Field(default=",", min_length=1, max_length=1)
    numeric: bool = False


def _cell(text: str, numeric: bool) -> Any:
    if not numeric:
        return text
    stripped = text.strip()
    if _INT.fullmatch(stripped):
        return int(stripped)
    if _FLOAT.fullmatch(stripped):
        number = float(stripped)
        return number if number not in (float("inf"), float("-inf")) else text
    return text


def _csv_to_json(params: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """Rows → a list of objects keyed by the header row; ``numeric`` converts number cells."""
    p = parse_params(CsvToJsonParams, params)
    if p.table is not None:
        raise ToolError(unresolved_held("table", p.table))
    if p.csv is None:
        raise ToolError("bad params: csv: field required")
    rows = (row for row in csv.reader(io.StringIO(p.csv), delimiter=p.delimiter, strict=True) if row)
    try:
        header = next(rows, None)
        if header is None:
            raise ToolError("csv: no header row")
        if len(set(header)) != len(header) or "" in header:
            raise ToolError("csv: header names must be unique and non-empty")
        per_record = sum(len(name) + 4 for name in header)  # the JSON text repeats every name
        records = []
        for number, row in enumerate(rows, start=2):
            if len(row) != len(header):
                raise ToolError(f"csv: row {number} has {len(row)} cells, the header has {len(header)}")
            ensure_fits(number * per_record, "csv_to_json")
            records.append({name: _cell(cell, p.numeric) for name, cell in zip(header, row)})
    except csv.Error as exc:
        raise ToolError(f"csv: malformed input: {exc}") from None
    return ToolResult(json_output(records, columns=header))


class JsonToCsvParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    data: Any
    columns: list[str] | None = Field(default=None, min_length=1)
    delimiter: str = Field(default=",", min_length=1, max_length=1)


def _csv_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return canonical_json(value)


def _json_to_csv(params: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """A list of objects → CSV with a header row (columns: given, else first-seen key order)."""
    p = parse_params(JsonToCsvParams, params)
    records = load_json_param(p.data, "data")
    if not isinstance(records, list) or not all(isinstance(item, dict) for item in records):
        raise ToolError("bad params: data: expected a list of objects")
    columns = p.columns or list(dict.fromkeys(key for item in records for key in item))
    ensure_fits((len(records) + 1) * len(columns), "json_to_csv")  # a delimiter or newline per cell
    out = BoundedText("json_to_csv")
    writer = csv.writer(out, delimiter=p.delimiter, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([_csv_value(item.get(column)) for column in columns] for item in records)
    return ToolResult(make_output(out.getvalue(), metadata={"rows": len(records), "columns": columns}))


json_transform = run_in_process(_json_transform)
csv_to_json = run_in_process(_csv_to_json)
json_to_csv = run_in_process(_json_to_csv)

JSON_TRANSFORM = ToolSpec(
    name="json_transform",
    fn=json_transform,
    description="Apply ops (get, pick, rename, filter, sort, map_field, group_count, sum, unique, "
    "flatten, limit, count) to JSON data; text is canonical JSON.",
    latency_s=0.001,
)
CSV_TO_JSON = ToolSpec(
    name="csv_to_json",
    fn=csv_to_json,
    description="Parse CSV with a header row into a JSON list of objects (numeric=true converts numbers).",
    latency_s=0.001,
)
JSON_TO_CSV = ToolSpec(
    name="json_to_csv",
    fn=json_to_csv,
    description="Write a JSON list of objects as CSV with a header row.",
    latency_s=0.001,
)
