"""``text_transform``: each op, the regex guard, safe templates, clean failures."""

import pytest

from subnets._regex import compile_guarded
from subnets.base import ToolContext, ToolError
from subnets.text import text_transform

CTX = ToolContext(task_id="t", node_id="txt", attempt=1, timeout_seconds=5.0)


async def run(**params):
    return (await text_transform(params, CTX)).output


@pytest.mark.parametrize(
    "params, text",
    [
        ({"op": "upper", "text": "Abc é"}, "ABC É"),
        ({"op": "lower", "text": "AbC"}, "abc"),
        ({"op": "strip", "text": "  x \n"}, "x"),
        ({"op": "dedent", "text": "    a\n      b\n"}, "a\n  b\n"),
        ({"op": "replace", "text": "a-b-c", "old": "-", "new": "+"}, "a+b+c"),
        ({"op": "regex_replace", "text": "a1b22c", "pattern": r"\d+", "repl": "#"}, "a#b#c"),
        (
            {"op": "regex_replace", "text": "2024-05-01", "pattern": r"(\d+)-(\d+)-(\d+)", "repl": r"\3/\2/\1"},
            "01/05/2024",
        ),
        ({"op": "join", "items": ["a", 1, {"b": [2]}], "sep": ", "}, 'a, 1, {"b":[2]}'),
        ({"op": "word_count", "text": "one two\tthree\nfour"}, "4"),
        ({"op": "split_lines", "text": "a\n\n b\n"}, '["a"," b"]'),
    ],
)
async def test_ops(params, text):
    assert (await run(**params)).text == text


async def test_replace_and_regex_replace_count_replacements():
    assert (await run(op="replace", text="aXbXc", old="X", new="")).artifacts.metadata == {"replacements": 2}
    output = await run(op="regex_replace", text="a b  c", pattern=r"\s+", repl=" ")
    assert (output.text, output.artifacts.metadata) == ("a b c", {"replacements": 2})


async def test_split_lines_metadata_and_keep_empty():
    output = await run(op="split_lines", text="a\n\nb", keep_empty=True)
    assert output.artifacts.metadata == {"lines": ["a", "", "b"], "count": 3}


async def test_extract_regex_returns_first_match_and_all_matches():
    output = await run(op="extract_regex", text="x=1, y=22, z=333", pattern=r"(\w)=(?P<n>\d+)", group="n")
    assert output.text == "1"
    assert output.artifacts.metadata == {"matches": ["1", "22", "333"]}


async def test_extract_regex_without_a_match_fails():
    with pytest.raises(ToolError, match="no match"):
        await run(op="extract_regex", text="abc", pattern=r"\d")


async def test_extract_regex_unknown_group_names_group():
    with pytest.raises(ToolError, match="group"):
        await run(op="extract_regex", text="a1", pattern=r"(\d)", group=3)


FENCED = "Here is the fix:\n```python\ndef f():\n    return 1\n```\nand a shell line\n```sh\nls\n```\n"


async def test_extract_code_block_takes_the_first_block_into_text_and_code():
    output = await run(op="extract_code_block", text=FENCED)
    assert output.text == output.artifacts.code == "def f():\n    return 1\n"
    assert output.artifacts.metadata == {"language": "python"}


async def test_extract_code_block_by_language():
    output = await run(op="extract_code_block", text=FENCED, language="SH")
    assert output.artifacts.code == "ls\n"


async def test_extract_code_block_without_a_block_fails():
    with pytest.raises(ToolError, match="no fenced code block"):
        await run(op="extract_code_block", text=FENCED, language="rust")


async def test_template_fills_names_and_keeps_escaped_braces():
    output = await run(
        op="template", text="{who} was {age} {{years}} {tags}", values={"who": "Ada", "age": 36, "tags": ["x"]}
    )
    assert output.text == 'Ada was 36 {years} ["x"]'


async def test_template_has_no_attribute_or_index_access_and_no_rescan():
    output = await run(op="template", text="{v.__class__} {v[0]} {v!r} {v}", values={"v": "{v}"})
    assert output.text == "{v.__class__} {v[0]} {v!r} {v}"


async def test_template_missing_value_names_it():
    with pytest.raises(ToolError, match="values: missing age, who"):
        await run(op="template", text="{who} {age}", values={})


@pytest.mark.parametrize(
    "params, field",
    [
        ({"text": "x"}, "discriminator 'op'"),
        ({"op": "shout", "text": "x"}, "shout"),
        ({"op": "upper"}, "upper.text"),
        ({"op": "replace", "text": "x", "new": "y"}, "replace.old"),
        ({"op": "join", "items": "abc"}, "join.items"),
        ({"op": "upper", "text": "x", "color": "red"}, "upper.color"),
        ({"op": "regex_replace", "text": "x", "pattern": "(", "repl": ""}, "pattern: invalid"),
        ({"op": "regex_replace", "text": "x", "pattern": "x", "repl": r"\9"}, "repl"),
    ],
)
async def test_bad_params_name_the_field(params, field):
    with pytest.raises(ToolError, match=field):
        await text_transform(params, CTX)


async def test_oversize_output_is_a_failure():
    with pytest.raises(ToolError, match="output too large: replace"):
        await run(op="replace", text="a" * 10_000, old="a", new="bb")


@pytest.mark.parametrize(
    "pattern, reason",
    [
        (r"(a+)+b", "quantifiers inside a repeated group"),
        (r"(a*)*", "quantifiers inside a repeated group"),
        (r"(ab?)+", "quantifiers inside a repeated group"),
        (r"(a|aa)+c", "alternation inside a repeated group"),
        (r"(\w+)\s\1", "back-references"),
        (r"(a)?(?(1)b|c)", "conditional"),
        ("a" * 300, "longer than"),
    ],
)
def test_regex_guard_refuses_exponential_shapes(pattern, reason):
    with pytest.raises(ToolError, match=reason):
        compile_guarded(pattern, 10)


@pytest.mark.parametrize(
    "pattern, accepted_chars, refused_chars",
    [
        (r".*x", 16 * 1024, None),  # one repeat may scan a whole 16 KiB text
        (r".*.*x", 600, 1000),  # two: a few hundred characters
        (r"\w*\w*\w*x", 120, 200),  # three: about a hundred
    ],
)
def test_regex_guard_bounds_polynomial_work_by_input_size(pattern, accepted_chars, refused_chars):
    compile_guarded(pattern, accepted_chars)
    if refused_chars is not None:
        with pytest.raises(ToolError, match="too costly"):
            compile_guarded(pattern, refused_chars)


async def test_regex_ops_refuse_text_over_16_kib():
    with pytest.raises(ToolError, match="regex_replace.text"):
        await run(op="regex_replace", text="a" * (16 * 1024 + 1), pattern="a", repl="b")


async def test_a_catastrophic_pattern_is_refused_before_it_runs():
    with pytest.raises(ToolError, match="pattern"):
        await run(op="extract_regex", text="a" * 40 + "!", pattern=r"^(a+)+$")
