"""``json_transform``, ``csv_to_json``, ``json_to_csv``: hand-checked results and clean failures."""

import json

import pytest

from subnets.base import ToolContext, ToolError
from subnets.transform import csv_to_json, json_to_csv, json_transform

CTX = ToolContext(task_id="t", node_id="x", attempt=1, timeout_seconds=5.0)

PEOPLE = [
    {"name": "ada", "born": 1815, "city": "London"},
    {"name": "alan", "born": 1912, "city": "London"},
    {"name": "marie", "born": 1867, "city": "Paris"},
]


async def transform(data, *ops):
    output = (await json_transform({"data": data, "ops": list(ops)}, CTX)).output
    assert json.loads(output.text) == output.artifacts.metadata["result"]
    return output.artifacts.metadata["result"]


@pytest.mark.parametrize(
    "ops, expected",
    [
        ([{"op": "get", "path": "1.name"}], "alan"),
        ([{"op": "get", "path": [2, "city"]}], "Paris"),
        ([{"op": "pick", "fields": ["name"]}], [{"name": "ada"}, {"name": "alan"}, {"name": "marie"}]),
        ([{"op": "filter", "field": "city", "eq": "London"}, {"op": "count"}], 2),
        (
            [{"op": "filter", "field": "born", "gt": 1850}, {"op": "pick", "fields": ["name"]}],
            [{"name": "alan"}, {"name": "marie"}],
        ),
        ([{"op": "filter", "field": "born", "lt": 1850}, {"op": "get", "path": "0.name"}], "ada"),
        ([{"op": "filter", "field": "name", "contains": "ar"}, {"op": "count"}], 1),
        ([{"op": "filter", "field": "city", "ne": "London"}, {"op": "count"}], 1),
        (
            [{"op": "sort", "key": "born", "reverse": True}, {"op": "limit", "n": 1}, {"op": "get", "path": "0.name"}],
            "alan",
        ),
        ([{"op": "group_count", "field": "city"}], {"London": 2, "Paris": 1}),
        ([{"op": "sum", "field": "born"}], 1815 + 1912 + 1867),
        ([{"op": "rename", "mapping": {"name": "who"}}, {"op": "get", "path": "0.who"}], "ada"),
        ([{"op": "map_field", "field": "name", "convert": "upper"}, {"op": "get", "path": "2.name"}], "MARIE"),
        ([{"op": "map_field", "field": "born", "convert": "str"}, {"op": "get", "path": "0.born"}], "1815"),
    ],
)
async def test_ops_on_records(ops, expected):
    assert await transform(PEOPLE, *ops) == expected


@pytest.mark.parametrize(
    "data, ops, expected",
    [
        ([[1, 2], 3, [2, 4]], [{"op": "flatten"}, {"op": "unique"}], [1, 2, 3, 4]),
        ([3, 1, 2], [{"op": "sort"}], [1, 2, 3]),
        ([" a ", "b "], [{"op": "map_field", "convert": "strip"}], ["a", "b"]),
        (["1", "2.0", 3], [{"op": "map_field", "convert": "int"}, {"op": "sum"}], 6),
        ([{"a": 1}, {"a": 1}, {"a": 2}], [{"op": "unique"}], [{"a": 1}, {"a": 2}]),
        ([True, 1, "1"], [{"op": "group_count"}], {"1": 2, "true": 1}),
        ('{"a": {"b": [10, 20]}}', [{"op": "get", "path": "a.b.-1"}], 20),  # data given as a JSON string
        ({"k": 1}, [], {"k": 1}),
    ],
)
async def test_ops_on_values(data, ops, expected):
    assert await transform(data, *ops) == expected


async def test_text_is_canonical_json():
    output = (await json_transform({"data": {"b": [1, 2], "a": "é"}, "ops": []}, CTX)).output
    assert output.text == '{"a":"é","b":[1,2]}'


@pytest.mark.parametrize(
    "params, message",
    [
        ({"ops": []}, "data"),
        ({"data": "{not json", "ops": []}, "data: not valid JSON"),
        ({"data": [], "ops": [{"op": "explode"}]}, "ops.0"),
        ({"data": [], "ops": [{"op": "limit"}]}, "ops.0.limit.n"),
        ({"data": [], "ops": [{"op": "filter", "field": "a"}]}, "exactly one of"),
        ({"data": [], "ops": [{"op": "filter", "field": "a", "eq": 1, "gt": 0}]}, "exactly one of"),
        ({"data": [], "ops": [{"op": "map_field", "convert": "reverse"}]}, "ops.0.map_field.convert"),
        ({"data": [], "ops": [{"op": "pick", "fields": ["a"], "extra": 1}]}, "ops.0.pick.extra"),
    ],
)
async def test_bad_params_name_the_field(params, message):
    with pytest.raises(ToolError, match=message):
        await json_transform(params, CTX)


@pytest.mark.parametrize(
    "data, op, message",
    [
        ({"a": 1}, {"op": "get", "path": "a.b"}, "not found"),
        ([1], {"op": "get", "path": "5"}, "not found"),
        ({"a": 1}, {"op": "sort"}, "expects a list"),
        ([1, "a"], {"op": "sort"}, "mixed types"),
        ([{"a": 1}, {}], {"op": "sort", "key": "a"}, "no key 'a'"),
        ([1, "x"], {"op": "sum"}, "not a number"),
        (["x"], {"op": "map_field", "convert": "int"}, "cannot apply int"),
        ([1, 2], {"op": "pick", "fields": ["a"]}, "objects"),
        (5, {"op": "count"}, "list or an object"),
    ],
)
async def test_ops_fail_cleanly_on_data_they_cannot_handle(data, op, message):
    with pytest.raises(ToolError, match=message):
        await json_transform({"data": data, "ops": [op]}, CTX)


async def test_filter_drops_items_without_the_field_or_incomparable():
    data = [{"n": 5}, {"m": 1}, {"n": "text"}, 7]
    assert await transform(data, {"op": "filter", "field": "n", "gt": 1}) == [{"n": 5}]


async def test_result_too_big_for_metadata_stays_in_text_only():
    data = ["x" * (16 * 1024 - 8)]  # its JSON fits the text; with the "result" key it passes 16 KiB
    output = (await json_transform({"data": data, "ops": []}, CTX)).output
    assert json.loads(output.text) == data and "result" not in output.artifacts.metadata


async def test_result_too_big_for_text_is_a_failure():
    with pytest.raises(ToolError, match="output too large: the JSON result"):
        await json_transform({"data": ["x" * 100] * 200, "ops": []}, CTX)


async def test_csv_to_json_with_numeric_conversion():
    output = (await csv_to_json({"csv": "name,age,score\nada,36,9.5\nalan,41,-2\n", "numeric": True}, CTX)).output
    rows = [{"age": 36, "name": "ada", "score": 9.5}, {"age": 41, "name": "alan", "score": -2}]
    assert json.loads(output.text) == rows
    assert output.artifacts.metadata == {"columns": ["name", "age", "score"], "result": rows}


async def test_csv_to_json_keeps_text_by_default_and_honours_delimiter_and_quotes():
    output = (await csv_to_json({"csv": 'a;b\n"x;y";007\n', "delimiter": ";"}, CTX)).output
    assert json.loads(output.text) == [{"a": "x;y", "b": "007"}]


@pytest.mark.parametrize(
    "params, message",
    [
        ({"csv": ""}, "no header"),
        ({"csv": "a,a\n1,2"}, "unique"),
        ({"csv": "a,b\n1,2\n3\n"}, "row 3 has 1 cells"),
        ({"csv": "a\n1", "delimiter": ";;"}, "delimiter"),
        ({"csv": 'a\n"unterminated'}, "malformed"),
        ({}, "csv"),
    ],
)
async def test_csv_to_json_failures(params, message):
    with pytest.raises(ToolError, match=message):
        await csv_to_json(params, CTX)


async def test_json_to_csv_writes_header_and_rows_and_round_trips():
    output = (await json_to_csv({"data": PEOPLE}, CTX)).output
    assert output.text == "name,born,city\nada,1815,London\nalan,1912,London\nmarie,1867,Paris\n"
    assert output.artifacts.metadata == {"rows": 3, "columns": ["name", "born", "city"]}
    back = (await csv_to_json({"csv": output.text, "numeric": True}, CTX)).output
    assert json.loads(back.text) == PEOPLE


async def test_json_to_csv_columns_order_and_missing_values():
    output = (await json_to_csv({"data": '[{"a": 1, "b": [2]}, {"c": null}]', "columns": ["b", "a"]}, CTX)).output
    assert output.text == "b,a\n[2],1\n,\n"


async def test_json_to_csv_needs_a_list_of_objects():
    with pytest.raises(ToolError, match="data: expected a list of objects"):
        await json_to_csv({"data": [1, 2]}, CTX)
