"""Everything parsed from a peer (or a user's file) fails as data, never as an exception.

Every checker that reads peer bytes is fed arbitrary bytes, arbitrary JSON and
plan-shaped JSON whose strings are built from DataRef fragments (digit runs of
any length included); none may raise. The digit bomb that used to escape
``check_response`` as a bare ``ValueError`` is a test of its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from neurons.cli import app
from protocol.dataref import DataRefError, compile_params, find_refs
from protocol.documents import PlanLoadError, load_plan_document
from protocol.response import check_response
from protocol.synapse import Constraints, NodeResponse, TaskPackage
from support.scale import examples
from validator.client import Reply
from validator.remote import _answer


def parse_node_response(raw: bytes, retries: int):
    """A provider's 200 reply carrying ``raw``, read as the remote runner reads it."""
    return _answer(Reply(200, raw, None, 0.0), retries)


REQUEST = TaskPackage(task_id="t", task_type="rag", constraints=Constraints(allowed_subnets=["s"]))
DIGIT_BOMB = "${a.output." + "9" * 4_301 + "}"


def plan_doc(params_b: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodes": [
            {"id": "a", "subnet": "s", "action": "echo", "params": {"text": "x"}},
            {"id": "b", "subnet": "s", "action": "echo", "params": params_b},
        ],
        "edges": [{"from": "a", "to": "b"}],
    }


def answer(plan: Any) -> bytes:
    doc = REQUEST.model_dump() | {
        "miner_uid": 1,
        "workflow_plan": plan,
        "total_estimated_cost": 0.01,
        "total_estimated_latency": 1.0,
        "confidence": 0.5,
        "reasoning": "r",
    }
    return json.dumps(doc).encode()


# -- the digit bomb -------------------------------------------------------------------


def test_a_digit_bomb_is_a_grammar_error() -> None:
    with pytest.raises(DataRefError, match="invalid DataRef syntax"):
        compile_params({"text": DIGIT_BOMB})
    with pytest.raises(DataRefError):
        compile_params({"text": "see " + DIGIT_BOMB})


@pytest.mark.parametrize(
    "ref",
    [
        "${a.output." + "x" * 65 + "}",  # a segment past 64 characters
        "${a.output" + ".k" * 33 + "}",  # a path past 32 segments
    ],
)
def test_every_length_in_a_ref_is_bounded(ref: str) -> None:
    with pytest.raises(DataRefError):
        compile_params({"text": ref})


def test_the_longest_legal_ref_still_resolves() -> None:
    path = ["9" * 64] + ["k"] * 31
    ref = "${a.output." + ".".join(path) + "}"
    value: Any = "found"
    for key in reversed(path[1:]):
        value = {key: value}
    assert compile_params({"v": ref}).resolve({"a": {"9" * 64: value}}) == {"v": "found"}


def test_check_response_blocks_the_bombed_node_and_keeps_the_response() -> None:
    checked = check_response(answer(plan_doc({"text": DIGIT_BOMB})), REQUEST)
    assert checked.ok, checked.reason
    assert checked.plan_check.node_errors["b"].startswith("bad_dataref:invalid DataRef syntax")


def test_check_response_turns_an_unforeseen_exception_into_a_reason(monkeypatch) -> None:
    import protocol.response as response

    def broken(*args: Any, **kwargs: Any) -> None:
        raise ValueError("Exceeds the limit (4300 digits) for integer string conversion")

    monkeypatch.setattr(response, "check_plan_for", broken)
    checked = check_response(answer(plan_doc({"text": "x"})), REQUEST)
    assert not checked.ok and checked.reason.startswith("response check failed: ValueError")


def test_a_lone_surrogate_is_not_json_and_a_pair_is_one_character() -> None:
    """``"\\ud800"`` parses in Python to a ``str`` that no UTF-8 encoder takes: stored as a
    miner's plan it made the validator's settling of the whole step raise (the plan's hash,
    the SQLite row). Refused where every answer is parsed, with its reason; ``"\\ud83d\\ude00"``
    (a pair, as Python's own ``json.dumps`` spells an emoji) is one character and fine."""
    for text in ("\ud800", "x \udfff", "\ud83d"):
        checked = check_response(answer(plan_doc({"text": text})), REQUEST)
        assert not checked.ok
        assert checked.reason == "response is not JSON: a string holds a lone UTF-16 surrogate (not Unicode text)"
    sent = answer(plan_doc({"text": "\U0001f600"}))
    assert b"\\ud83d\\ude00" in sent
    checked = check_response(sent, REQUEST)
    assert checked.ok, checked.reason
    assert checked.synapse is not None and checked.synapse.workflow_plan.nodes[1].params == {"text": "\U0001f600"}


def test_the_cli_reports_the_bomb_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bomb.json"
    path.write_text(json.dumps(plan_doc({"text": DIGIT_BOMB})))
    result = CliRunner().invoke(app, ["plan", "check", str(path)])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "bad_dataref:invalid DataRef syntax" in result.stderr


# -- bad files at the command line ------------------------------------------------------

BAD_FILES = {
    "deep_list": "[" * 1_000 + "]" * 1_000,
    "deep_params": json.dumps(plan_doc({"x": 1}))[:-2].replace('{"x": 1}', '{"x": ' + "[" * 1200 + "]" * 1200 + "}"),
    "deep_objects": '{"workflow_plan":' + '{"a":' * 5_000 + "1" + "}" * 5_001,
    "nan": '{"nodes":[{"id":"a","subnet":"s","action":"echo","estimated_cost":NaN}],"edges":[]}',
    "infinity_literal": '{"nodes":[{"id":"a","subnet":"s","action":"echo","estimated_cost":Infinity}],"edges":[]}',
    "overflowing_float": '{"nodes":[{"id":"a","subnet":"s","action":"echo","estimated_cost":1e999}],"edges":[]}',
    "huge_int": '{"nodes":[{"id":"a","subnet":"s","action":"echo","estimated_cost":' + "9" * 5_000 + '}],"edges":[]}',
    "binary": "\udcff\udcfe garbage",
    "lone_surrogate": '{"nodes":[{"id":"a","subnet":"s","action":"echo","params":{"text":"\\ud800"}}],"edges":[]}',
    "empty": "",
    "not_an_object": "[1, 2, 3]",
}


@pytest.mark.parametrize("command", [["plan", "check", "{}"], ["run", "{}"], ["run", "{}", "--json"]])
@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_every_bad_file_is_one_line_and_exit_2(tmp_path: Path, command: list[str], name: str) -> None:
    path = tmp_path / f"{name}.json"
    path.write_bytes(BAD_FILES[name].encode("utf-8", "surrogateescape"))
    result = CliRunner().invoke(app, [str(path) if arg == "{}" else arg for arg in command])
    assert result.exit_code == 2, (result.exit_code, result.output[-300:])
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr[-300:]


def test_sums_that_overflow_print_as_null_never_as_infinity(tmp_path: Path) -> None:
    nodes = [
        {
            "id": n,
            "subnet": "s",
            "action": "echo",
            "params": {"text": "hi"},
            "estimated_cost": 1e308,
            "estimated_latency": 1e308,
        }
        for n in ("a", "b")
    ]
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"nodes": nodes, "edges": [{"from": "a", "to": "b"}]}))
    for command in (["plan", "check"], ["run"]):
        result = CliRunner().invoke(app, [*command, str(path), "--json"])
        assert result.exit_code == 0, result.output
        text = result.stdout
        assert "Infinity" not in text and "NaN" not in text
        assert json.loads(text)["critical_path_s"] is None


# -- every checker on arbitrary input ---------------------------------------------------

_fragments = st.sampled_from(
    [
        "${",
        "$${",
        "}",
        ".",
        "output",
        "a",
        "b",
        "zz",
        "-",
        "_",
        "${a.output.",
        "${b.output.",
        "text",
        "0",
        " ",
    ]
)
_ref_strings = st.lists(
    st.one_of(
        _fragments,
        st.text(max_size=8),
        st.integers(0, 6_000).map(lambda n: "9" * n),
        st.integers(0, 6_000).map(lambda n: "${a.output." + "9" * n + "}"),
    ),
    max_size=8,
).map("".join)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _ref_strings,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_ref_strings, children, max_size=4),
    max_leaves=20,
)
_node = st.fixed_dictionaries(
    {
        "id": st.sampled_from(["a", "b", "c"]),
        "subnet": st.sampled_from(["s", "t"]),
        "action": st.just("echo"),
        "params": st.dictionaries(st.sampled_from(["text", "q"]), _json, max_size=3),
    },
)
_plans = st.fixed_dictionaries(
    {
        "nodes": st.lists(_node, max_size=4),
        "edges": st.lists(
            st.fixed_dictionaries(
                {"from": st.sampled_from(["a", "b", "c", "d"]), "to": st.sampled_from(["a", "b", "c"])}
            ),
            max_size=4,
        ),
    }
)
_any_doc = st.one_of(
    _json, _plans, _plans.map(lambda p: {"workflow_plan": p}), _plans.map(lambda p: {"dag": p["nodes"]})
)
FUZZ = settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(raw=st.binary(max_size=2_000))
def test_check_response_never_raises_on_bytes(raw: bytes) -> None:
    assert not check_response(raw, REQUEST).ok


@FUZZ
@given(doc=_any_doc)
def test_check_response_never_raises_on_json(doc: Any) -> None:
    for raw in (json.dumps(doc).encode(), answer(doc)):
        checked = check_response(raw, REQUEST)
        assert checked.ok or checked.reason


@FUZZ
@given(doc=_any_doc)
def test_plan_documents_and_refs_fail_as_their_own_errors(doc: Any) -> None:
    try:
        load_plan_document(doc)
    except PlanLoadError:
        pass
    try:
        find_refs(doc)
        if isinstance(doc, dict):
            compile_params(doc).resolve({"a": {"text": "x"}, "b": [1]})
    except (DataRefError, LookupError):
        pass


@FUZZ
@given(raw=st.one_of(st.binary(max_size=500), _any_doc.map(lambda d: json.dumps(d).encode())))
def test_a_node_response_is_parsed_or_refused(raw: bytes) -> None:
    answer = parse_node_response(raw, 0)
    assert answer.output is not None or answer.error


def test_a_node_response_is_never_an_exception_on_known_bad_shapes() -> None:
    for raw in (b"[" * 5_000, b'{"cost_tao": ' + b"9" * 5_000 + b"}", b'{"cost_tao": NaN}', b"\xff"):
        assert parse_node_response(raw, 0).error
    assert NodeResponse.model_validate_json(b"{}").output is None
