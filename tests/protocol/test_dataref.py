"""DataRef grammar and resolution (docs/dataref.md)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.dataref import (
    DataRef,
    DataRefError,
    MissingField,
    ParamsTooDeep,
    compile_params,
    find_refs,
    ref,
)
from support.scale import examples


def _output(text: str = "", code: str = "", **metadata: object) -> dict:
    return {"text": text, "artifacts": {"code": code, "metadata": metadata}}


OUTPUTS = {
    "a": _output("hello", items=[10, {"k": "v"}], score=0.5, nested={"x": [1, 2]}, flag=None),
    "b": _output("${a.output.text}", code="print(1)"),
}


def resolve(params: dict, outputs: dict = OUTPUTS) -> dict:
    return compile_params(params).resolve(outputs)


class TestWholeValue:
    @pytest.mark.parametrize(
        ("ref", "expected"),
        [
            ("${a.output.text}", "hello"),
            ("${a.output.artifacts.metadata.score}", 0.5),
            ("${a.output.artifacts.metadata.items}", [10, {"k": "v"}]),
            ("${a.output.artifacts.metadata.nested}", {"x": [1, 2]}),
            ("${a.output.artifacts.metadata.flag}", None),
            ("${b.output.artifacts.code}", "print(1)"),
        ],
    )
    def test_takes_the_referenced_json_type(self, ref: str, expected: object) -> None:
        assert resolve({"p": ref}) == {"p": expected}

    def test_list_index_segment(self) -> None:
        assert resolve({"p": "${a.output.artifacts.metadata.items.0}"}) == {"p": 10}
        assert resolve({"p": "${a.output.artifacts.metadata.items.1.k}"}) == {"p": "v"}

    def test_numeric_segment_is_a_key_on_dicts(self) -> None:
        outputs = {"a": _output(**{"0": "zero"})}
        assert resolve({"p": "${a.output.artifacts.metadata.0}"}, outputs) == {"p": "zero"}


class TestInterpolation:
    def test_string_as_is(self) -> None:
        assert resolve({"p": "say ${a.output.text}!"}) == {"p": "say hello!"}

    def test_number_dict_and_list_as_compact_json(self) -> None:
        params = {
            "n": "n=${a.output.artifacts.metadata.score}",
            "d": "d=${a.output.artifacts.metadata.nested}",
            "l": "${a.output.artifacts.metadata.items} end",
            "z": "z=${a.output.artifacts.metadata.flag}",
        }
        assert resolve(params) == {
            "n": "n=0.5",
            "d": 'd={"x":[1,2]}',
            "l": '[10,{"k":"v"}] end',
            "z": "z=null",
        }

    def test_non_ascii_kept(self) -> None:
        outputs = {"a": _output(m={"name": "café"})}
        assert resolve({"p": "x ${a.output.artifacts.metadata.m}"}, outputs) == {"p": 'x {"name":"café"}'}

    def test_several_refs_in_one_string(self) -> None:
        assert resolve({"p": "${a.output.text}-${b.output.artifacts.code}"}) == {"p": "hello-print(1)"}

    def test_refs_at_any_depth_but_not_in_keys(self) -> None:
        params = {
            "outer": [{"inner": "${a.output.text}"}, "${a.output.artifacts.metadata.score}"],
            "${a.output.text}": 1,
        }
        assert resolve(params) == {"outer": [{"inner": "hello"}, 0.5], "${a.output.text}": 1}


class TestEscapeAndInjection:
    def test_escape_becomes_literal(self) -> None:
        assert resolve({"p": "cost $${a.output.text}"}) == {"p": "cost ${a.output.text}"}
        assert find_refs({"p": "$${a.output.text}"}) == []

    def test_escape_next_to_a_real_ref(self) -> None:
        assert resolve({"p": "$${x} ${a.output.text}"}) == {"p": "${x} hello"}

    def test_escape_only_params_resolve_without_outputs(self) -> None:
        compiled = compile_params({"p": ["$${"]})
        assert compiled.refs == ()
        assert compiled.resolve({}) == {"p": ["${"]}

    def test_upstream_output_is_never_rescanned(self) -> None:
        # b's text is the literal "${a.output.text}"; it must not be resolved again.
        assert resolve({"p": "${b.output.text}"}) == {"p": "${a.output.text}"}
        assert resolve({"p": "got ${b.output.text}"}) == {"p": "got ${a.output.text}"}


class TestMissing:
    @pytest.mark.parametrize(
        "ref",
        [
            "${a.output.nope}",
            "${a.output.artifacts.metadata.items.2}",  # index out of range
            "${a.output.artifacts.metadata.items.x}",  # key on a list
            "${a.output.text.0}",  # indexing a string
            "${a.output.artifacts.metadata.score.x}",  # indexing a number
            "${zz.output.text}",  # node absent from outputs
        ],
    )
    def test_raises_missing_field_named_by_the_ref(self, ref: str) -> None:
        with pytest.raises(MissingField) as info:
            resolve({"p": f"x {ref}"})
        assert str(info.value) == ref
        assert info.value.ref.text == ref


class TestSyntax:
    @pytest.mark.parametrize(
        "text",
        [
            "${a}",
            "${a.output}",
            "${a.output.}",
            "${a.outputs.text}",
            "${a.output.text",
            "${a b.output.text}",
            "${.output.text}",
            "x ${",
            "${" + "n" * 65 + ".output.text}",
            "${a.output.te xt}",
        ],
    )
    def test_unescaped_opener_without_valid_ref(self, text: str) -> None:
        with pytest.raises(DataRefError, match="invalid DataRef syntax"):
            compile_params({"p": text})

    def test_message_quotes_truncated_fragment(self) -> None:
        with pytest.raises(DataRefError) as info:
            compile_params({"p": "ok ${" + "x" * 500})
        message = str(info.value)
        assert "'${xxx" in message
        assert len(message) < 120

    def test_dollar_without_brace_is_plain_text(self) -> None:
        params = {"p": "costs $5 and $$ {x}"}
        assert compile_params(params).resolve({}) is params


class TestCompiled:
    def test_refs_in_order_and_sources(self) -> None:
        compiled = compile_params({"x": "${b.output.text}", "y": ["${a.output.text} ${b.output.artifacts.code}"]})
        assert [ref.text for ref in compiled.refs] == [
            "${b.output.text}",
            "${a.output.text}",
            "${b.output.artifacts.code}",
        ]
        assert compiled.sources == frozenset({"a", "b"})
        assert compiled.refs[2] == DataRef("b", ("artifacts", "code"), "${b.output.artifacts.code}")

    def test_params_without_refs_resolve_to_same_object(self) -> None:
        params = {"q": "plain", "n": [1, {"k": "$ {"}]}
        assert compile_params(params).resolve({}) is params

    def test_resolve_does_not_mutate_params_and_is_repeatable(self) -> None:
        params = {"p": "${a.output.text}", "keep": {"k": 1}}
        compiled = compile_params(params)
        first = compiled.resolve(OUTPUTS)
        second = compiled.resolve({"a": _output("other")})
        assert params == {"p": "${a.output.text}", "keep": {"k": 1}}
        assert (first["p"], second["p"]) == ("hello", "other")

    def test_max_depth(self) -> None:
        params: dict = {"v": "${a.output.text}"}
        for _ in range(3):
            params = {"n": params}
        assert compile_params(params, max_depth=4).refs  # 4 levels is fine
        with pytest.raises(ParamsTooDeep):
            compile_params(params, max_depth=3)

    def test_extreme_depth_is_a_clear_error(self) -> None:
        params: dict = {}
        for _ in range(5000):
            params = {"n": params}
        with pytest.raises(DataRefError):
            compile_params(params, max_depth=10**6)


# Hypothesis: arbitrary JSON-like params, with DataRef-ish text mixed in.
_fragments = st.sampled_from(
    ["${a.output.text}", "${b.output.0.x}", "${", "$${", "$", "{", "}", ".output.", "a", "b", "text", "0", ".", "-"]
)


def _json_params(texts: st.SearchStrategy[str]) -> st.SearchStrategy[dict]:
    values = st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), texts),
        lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(texts, children, max_size=4)),
        max_leaves=20,
    )
    return st.dictionaries(texts, values, max_size=5)


_any_params = _json_params(st.one_of(st.text(max_size=12), st.lists(_fragments, max_size=8).map("".join)))
_plain_params = _json_params(st.text(st.characters(blacklist_characters="$"), max_size=12))


@settings(max_examples=examples(300), deadline=None)
@given(params=_any_params, outputs=st.dictionaries(st.sampled_from(["a", "b", "0"]), _any_params, max_size=3))
def test_compile_and_resolve_only_raise_their_own_errors(params: dict, outputs: dict) -> None:
    try:
        compiled = compile_params(params)
    except DataRefError:
        return
    try:
        compiled.resolve(outputs)
    except MissingField:
        pass


@settings(max_examples=examples(200), deadline=None)
@given(params=_plain_params)
def test_params_without_dollar_resolve_to_identical_object(params: dict) -> None:
    compiled = compile_params(params)
    assert compiled.refs == ()
    assert compiled.resolve({}) is params


class TestInputRefs:
    def test_input_refs_read_the_bound_inputs(self) -> None:
        outputs = {**OUTPUTS, "input": {"rows": [{"p": 3}], "city": "Oslo"}}
        assert resolve({"p": "${input.rows.0.p}", "q": "in ${input.city}: ${a.output.text}"}, outputs) == {
            "p": 3,
            "q": "in Oslo: hello",
        }

    def test_input_refs_are_not_node_sources(self) -> None:
        compiled = compile_params({"p": "${input.x} ${a.output.text}"})
        assert [ref.is_input for ref in compiled.refs] == [True, False]
        assert compiled.sources == {"a"}

    def test_a_node_whose_name_starts_with_input_is_a_node(self) -> None:
        [found] = find_refs({"p": "${inputs.output.text}"})
        assert (found.node_id, found.path, found.is_input) == ("inputs", ("text",), False)

    def test_missing_input_is_a_missing_field(self) -> None:
        with pytest.raises(MissingField, match=r"\$\{input.nope\}"):
            resolve({"p": "${input.nope}"}, {**OUTPUTS, "input": {}})


class TestRefText:
    @pytest.mark.parametrize(
        ("source", "path", "text"),
        [
            ("a", ("text",), "${a.output.text}"),
            ("input", ("rows", 0, "p"), "${input.rows.0.p}"),
            ("s-1", ("artifacts", "metadata", "hits"), "${s-1.output.artifacts.metadata.hits}"),
        ],
    )
    def test_ref_writes_what_the_parser_reads(self, source: str, path: tuple, text: str) -> None:
        assert ref(source, *path) == text
        [parsed] = find_refs({"p": text})
        assert (parsed.node_id, parsed.path) == (source, tuple(str(s) for s in path))

    @pytest.mark.parametrize(
        ("source", "path"), [("a b", ("text",)), ("a", ()), ("a", ("x.y",)), ("a", ("",)), ("input", ())]
    )
    def test_ref_refuses_what_would_not_parse_back(self, source: str, path: tuple) -> None:
        with pytest.raises(DataRefError):
            ref(source, *path)
