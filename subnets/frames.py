"""The frame tools: ``split`` yields one frame per item, ``collect`` joins frames back.

``split`` is a generator (docs/execution.md, generator nodes and frames): the nodes
that reference it run once per frame. Its items are a list (``items``, given as
itself or as a string holding JSON), or the lines of ``text`` cut at ``sep``::

    {"items": "${load.output.artifacts.metadata.result}"}   {"text": "a\\nb", "sep": "\\n"}

Frame ``i`` is ``{text: the item (as compact JSON unless a string),
artifacts.metadata: {item, index: i}}``. Splitting waits for no one: every frame is
handed on the moment it is made.

``collect`` receives its params once per frame, in frame order, as ``{"frames":
[...]}`` (the executor builds that list); each frame's ``item`` becomes one entry of
``artifacts.metadata.items``, and the text is those items' texts joined by the first
frame's ``sep`` (a newline by default).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from protocol.output import NodeOutput

from ._common import BoundedText, load_json_param, make_output, parse_params
from .base import ToolContext, ToolError, ToolResult, ToolSpec

MAX_ITEMS = 10_000
"""The most frames one ``split`` makes; the executor's own frame limit is usually lower."""


class SplitParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: Any = None
    text: str | None = None
    sep: str = Field(default="\n", min_length=1)

    @model_validator(mode="after")
    def _one_source(self) -> SplitParams:
        if (self.items is None) == (self.text is None):
            raise ValueError("give exactly one of items (a list) or text")
        return self


def _item_text(item: Any) -> str:
    if isinstance(item, str):
        return item
    return json.dumps(item, separators=(",", ":"), ensure_ascii=False)


async def split(params: dict[str, Any], ctx: ToolContext) -> AsyncGenerator[ToolResult, None]:
    """One frame per item of ``items``, or per piece of ``text`` cut at ``sep``."""
    p = parse_params(SplitParams, params)
    if p.text is not None:
        items: Any = p.text.split(p.sep)
    else:
        items = load_json_param(p.items, "items")
    if not isinstance(items, list):
        raise ToolError(f"bad params: items: expects a list, got {type(items).__name__}")
    if len(items) > MAX_ITEMS:
        raise ToolError(f"bad params: items: {len(items)} items, at most {MAX_ITEMS}")
    for index, item in enumerate(items):
        yield ToolResult(make_output(_item_text(item), metadata={"item": item, "index": index}))


class CollectParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    frames: list[dict[str, Any]]


async def collect(params: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """Join the frames' ``item`` values in frame order."""
    p = parse_params(CollectParams, params)
    items = [frame.get("item") for frame in p.frames]
    sep = p.frames[0].get("sep", "\n") if p.frames else "\n"
    if not isinstance(sep, str):
        raise ToolError("bad params: sep: expects a string")
    text = BoundedText("the collected text")
    for n, item in enumerate(items):
        text.write((sep if n else "") + _item_text(item))
    return ToolResult(make_output(text.getvalue(), metadata={"items": items, "count": len(items)}))


def frames_summary(count: int) -> NodeOutput:
    """A generator's own output, once its frames are out: how many there were."""
    return make_output(f"{count} frames", metadata={"frames": count})


SPLIT = ToolSpec(
    name="split",
    fn=split,  # type: ignore[arg-type]  # a generator: the registry streams it (ToolSpec.frames)
    description="Yield one frame per item of items (a list) or per piece of text cut at sep; "
    "the nodes that reference it run once per frame.",
    frames=True,
)
COLLECT = ToolSpec(
    name="collect",
    fn=collect,
    description="Join the frames of a generator in order: metadata.items, and their texts joined by sep.",
)
