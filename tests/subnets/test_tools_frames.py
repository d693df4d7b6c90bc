"""The frame tools (``split``, ``collect``) and LocalRunner's streaming of a generator."""

from __future__ import annotations

import pytest

from protocol.output import NodeOutput
from protocol.runner import NodeCall
from protocol.synapse import ToolInfo
from subnets.base import ToolContext, ToolError, ToolRegistry, ToolResult, ToolSpec
from subnets.frames import collect, split
from subnets.registry import default_registry
from subnets.runner import LocalRunner

CTX = ToolContext("t", "n", 1, 5.0)


async def _frames(params: dict) -> list[NodeOutput]:
    return [result.output async for result in split(params, CTX)]


async def test_split_yields_one_frame_per_item_or_piece() -> None:
    frames = await _frames({"items": ["a", {"k": 1}, 3]})
    assert [f.text for f in frames] == ["a", '{"k":1}', "3"]
    assert [f.artifacts.metadata for f in frames] == [
        {"item": "a", "index": 0},
        {"item": {"k": 1}, "index": 1},
        {"item": 3, "index": 2},
    ]
    assert [f.text for f in await _frames({"items": "[1, 2]"})] == ["1", "2"]  # a string holding JSON
    assert [f.text for f in await _frames({"text": "x;y", "sep": ";"})] == ["x", "y"]


@pytest.mark.parametrize(
    "params, message",
    [
        ({}, "exactly one of items"),
        ({"items": [1], "text": "a"}, "exactly one of items"),
        ({"items": {"a": 1}}, "expects a list"),
        ({"items": "not json"}, "not valid JSON"),
    ],
)
async def test_split_refuses_bad_params(params: dict, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        await _frames(params)


async def test_collect_joins_items_in_frame_order() -> None:
    result = await collect({"frames": [{"item": "a", "sep": "+"}, {"item": 2, "sep": "+"}]}, CTX)
    assert result.output.text == "a+2"
    assert result.output.artifacts.metadata == {"items": ["a", 2], "count": 2}
    empty = await collect({"frames": []}, CTX)
    assert (empty.output.text, empty.output.artifacts.metadata) == ("", {"items": [], "count": 0})


def _call(action: str, params: dict, subnet: str = "sn1") -> NodeCall:
    return NodeCall("t", "n", subnet, action, params, 5.0, 1)


async def test_local_runner_emits_each_frame_and_stops_when_told() -> None:
    closed: list[bool] = []

    async def numbers(params: dict, ctx: ToolContext):
        try:
            for i in range(100):
                yield ToolResult(NodeOutput(text=str(i)), cost_tao=0.5)
        finally:
            closed.append(True)

    registry = ToolRegistry()
    registry.register(ToolSpec("numbers", numbers, "count", frames=True))  # type: ignore[arg-type]
    seen: list[str] = []
    result = await LocalRunner(registry).run_frames(
        _call("numbers", {}),
        lambda f: seen.append(f.text) or len(seen) < 3,
    )
    assert seen == ["0", "1", "2"] and closed == [True]  # the tool was closed, not left suspended
    assert result.cost_tao == 1.5 and result.output.artifacts.metadata == {"frames": 3}


async def test_local_runner_prices_a_generator_like_any_node_of_its_subnet() -> None:
    runner = LocalRunner(default_registry(), subnets={"sn1": ToolInfo(type="data", avg_cost=0.25)})
    seen: list[str] = []
    result = await runner.run_frames(_call("split", {"items": [1, 2]}), lambda f: seen.append(f.text) or True)
    assert seen == ["1", "2"] and result.cost_tao == 0.25


async def test_a_generator_is_not_called_as_a_node_nor_a_node_as_a_generator() -> None:
    runner = LocalRunner(default_registry())
    plain = await runner.run(_call("split", {"items": [1]}))
    assert plain.output is None and "is a generator" in plain.error
    streamed = await runner.run_frames(_call("echo", {"text": "x"}), lambda f: True)
    assert streamed.output is None and "not a generator" in streamed.error
