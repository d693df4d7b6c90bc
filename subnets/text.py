"""``text_transform``: one text operation per call, chosen by ``op``.

Each op is a small params model with its own fields, so a missing or wrong
field is reported as ``<op>.<field>``. Regex ops go through
:mod:`subnets._regex`, which refuses patterns whose backtracking could run
away on the given input. Ops that can grow their input (replace, regex_replace,
join, split_lines, template) measure the result before building it and refuse
one over the output limit; the op runs in a worker thread, off the event loop.
"""

from __future__ import annotations

import re
import textwrap
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

from protocol.limits import OUTPUT_TEXT_MAX_BYTES
from protocol.output import NodeOutput

from ._common import bounded_json, ensure_fits, make_output, parse_params
from ._regex import compile_guarded
from .base import ToolContext, ToolError, ToolResult, ToolSpec, run_in_process

MAX_TEXT_CHARS = 256 * 1024
MAX_REGEX_TEXT_CHARS = OUTPUT_TEXT_MAX_BYTES
"""Regex ops take at most what a node can output as text (16 KiB)."""

Text = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]


class _TextOp(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def run(self) -> NodeOutput:
        raise NotImplementedError


class Upper(_TextOp):
    op: Literal["upper"]
    text: Text

    def run(self) -> NodeOutput:
        return make_output(self.text.upper())


class Lower(_TextOp):
    op: Literal["lower"]
    text: Text

    def run(self) -> NodeOutput:
        return make_output(self.text.lower())


class Strip(_TextOp):
    op: Literal["strip"]
    text: Text

    def run(self) -> NodeOutput:
        return make_output(self.text.strip())


class Dedent(_TextOp):
    op: Literal["dedent"]
    text: Text

    def run(self) -> NodeOutput:
        return make_output(textwrap.dedent(self.text))


class Replace(_TextOp):
    op: Literal["replace"]
    text: Text
    old: str = Field(min_length=1, max_length=4096)
    new: str = Field(max_length=4096)

    def run(self) -> NodeOutput:
        count = self.text.count(self.old)
        ensure_fits(len(self.text) + count * (len(self.new) - len(self.old)), "replace")
        return make_output(self.text.replace(self.old, self.new), metadata={"replacements": count})


class RegexReplace(_TextOp):
    """``re.subn``; ``repl`` may use ``\\1`` / ``\\g<name>`` group references."""

    op: Literal["regex_replace"]
    text: Annotated[str, Field(max_length=MAX_REGEX_TEXT_CHARS)]
    pattern: str
    repl: str = Field(max_length=256)

    def run(self) -> NodeOutput:
        regex = compile_guarded(self.pattern, len(self.text))
        size, end = 0, 0

        def expand(match: re.Match[str]) -> str:
            nonlocal size, end
            piece = match.expand(self.repl)
            size += match.start() - end + len(piece)
            end = match.end()
            ensure_fits(size, "regex_replace")
            return piece

        try:
            result, count = regex.subn(expand, self.text)
        except (re.error, IndexError) as exc:
            raise ToolError(f"bad params: repl: {exc}") from None
        return make_output(result, metadata={"replacements": count})


class ExtractRegex(_TextOp):
    """All matches of ``pattern`` (``group`` of each, by number or name) in metadata.matches;
    text is the first. No match is a failure: there is nothing to pass on."""

    op: Literal["extract_regex"]
    text: Annotated[str, Field(max_length=MAX_REGEX_TEXT_CHARS)]
    pattern: str
    group: int | str = 0

    def run(self) -> NodeOutput:
        regex = compile_guarded(self.pattern, len(self.text))
        try:
            matches = [match.group(self.group) or "" for match in regex.finditer(self.text)]
        except IndexError:
            raise ToolError(f"bad params: group: no group {self.group!r} in the pattern") from None
        if not matches:
            raise ToolError("extract_regex: no match")
        return make_output(matches[0], metadata={"matches": matches})


class SplitLines(_TextOp):
    """Text becomes the JSON list of lines; metadata ``{lines, count}``."""

    op: Literal["split_lines"]
    text: Text
    keep_empty: bool = False

    def run(self) -> NodeOutput:
        lines = [line for line in self.text.splitlines() if self.keep_empty or line.strip()]
        return make_output(bounded_json(lines), metadata={"lines": lines, "count": len(lines)})


class Join(_TextOp):
    """Items joined by ``sep``; non-string items appear as compact JSON."""

    op: Literal["join"]
    items: list[Any] = Field(max_length=100_000)
    sep: str = Field(default="\n", max_length=256)

    def run(self) -> NodeOutput:
        parts: list[str] = []
        size = 0
        for item in self.items:
            part = item if isinstance(item, str) else bounded_json(item, what="join")
            size += len(part) + (len(self.sep) if parts else 0)
            ensure_fits(size, "join")
            parts.append(part)
        return make_output(self.sep.join(parts))


class WordCount(_TextOp):
    op: Literal["word_count"]
    text: Text

    def run(self) -> NodeOutput:
        count = len(self.text.split())
        return make_output(str(count), metadata={"count": count})


_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)^[ \t]*```", re.MULTILINE | re.DOTALL)


class ExtractCodeBlock(_TextOp):
    """The first fenced ``` block (of ``language`` when given) → text and artifacts.code."""

    op: Literal["extract_code_block"]
    text: Text
    language: str | None = Field(default=None, max_length=64)

    def run(self) -> NodeOutput:
        for match in _FENCE.finditer(self.text):
            language = match.group(1)
            if self.language is None or language.lower() == self.language.lower():
                code = match.group(2)
                return make_output(code, code=code, metadata={"language": language})
        wanted = f" of language {self.language!r}" if self.language else ""
        raise ToolError(f"extract_code_block: no fenced code block{wanted}")


_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


class Template(_TextOp):
    """``{name}`` fields filled from ``values``; ``{{`` and ``}}`` are literal braces.

    Only bare names are fields — no attribute access, indexing or format specs,
    unlike ``str.format`` — and a value is inserted as is (non-strings as compact
    JSON), never re-scanned.
    """

    op: Literal["template"]
    text: Text
    values: dict[str, Any] = Field(default_factory=dict)

    def run(self) -> NodeOutput:
        fields = [m.group(1) for m in _FIELD.finditer(self.text)]
        missing = sorted({name for name in fields if name} - set(self.values))
        if missing:
            raise ToolError(f"bad params: values: missing {', '.join(missing)}")
        filled = {name: self._render(name) for name in set(fields) if name}
        ensure_fits(
            len(self.text) + sum(len(filled[name]) - len(name) - 2 if name else -1 for name in fields), "template"
        )
        return make_output(_FIELD.sub(lambda m: filled[m.group(1)] if m.group(1) else m.group()[0], self.text))

    def _render(self, name: str) -> str:
        value = self.values[name]
        return value if isinstance(value, str) else bounded_json(value, what="template")


TextOp = Annotated[
    Upper
    | Lower
    | Strip
    | Dedent
    | Replace
    | RegexReplace
    | ExtractRegex
    | SplitLines
    | Join
    | WordCount
    | ExtractCodeBlock
    | Template,
    Field(discriminator="op"),
]


class TextTransformParams(RootModel[TextOp]):
    pass


def _text_transform(params: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return ToolResult(parse_params(TextTransformParams, params).root.run())


text_transform = run_in_process(_text_transform)


TEXT_TRANSFORM = ToolSpec(
    name="text_transform",
    fn=text_transform,
    description="One text op: upper, lower, strip, dedent, replace(old,new), regex_replace(pattern,repl), "
    "extract_regex(pattern,group), split_lines, join(items,sep), word_count, "
    "extract_code_block(language?), template(values).",
    latency_s=0.001,
)
