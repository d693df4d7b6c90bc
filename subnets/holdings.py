"""Held data: what a task's data and retrieval subnets hold for an instance, given to
the calls that read it and to no other.

An instance's inputs name its documents or tables by id (``"collection": "c-3f9a2b"``,
``"table": "t-81c0d4e2"``); the data itself is in :attr:`protocol.task.Task.holdings`
and never in the inputs. Exactly two calls read it (:data:`READERS`): ``search`` with a
``collection`` param (a retrieval subnet) gets the documents as ``documents``, and
``csv_to_json`` with a ``table`` param (a data subnet) gets the CSV text as ``csv``.
Every other call passes through untouched, so a text, math or exec node handed the id
sees the id string and nothing else. An id the instance does not hold fails that node
with one error naming it; the call never reaches the tool.

:func:`holding` wraps any :class:`~protocol.runner.NodeRunner`: the validator's owned
runner, and its adapter runner, so that a remote provider is sent the documents,
never the id (the validator resolves it). A frame runner stays a frame runner.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from protocol.runner import Emit, FrameRunner, NodeCall, NodeResult, NodeRunner

__all__ = ["READERS", "holding", "resolve_held"]

READERS: Mapping[str, tuple[str, str]] = {"search": ("collection", "documents"), "csv_to_json": ("table", "csv")}
"""action -> (the param naming a held id, the param that receives the held data)."""


def resolve_held(call: NodeCall, holdings: Mapping[str, Any]) -> NodeCall | str:
    """``call`` with its held id replaced by the data, the call itself when it reads
    nothing held, or why it cannot run (an error naming the id)."""
    names = READERS.get(call.action)
    if names is None or names[0] not in call.params:
        return call
    by_id, given = names
    held_id = call.params[by_id]
    if given in call.params:
        return f"{call.action}: give {by_id} or {given}, not both"
    if not isinstance(held_id, str) or held_id not in holdings:
        return f"{call.action}: no held {by_id} {_shown(held_id)} for this task"
    params = {key: value for key, value in call.params.items() if key != by_id}
    params[given] = holdings[held_id]
    return replace(call, params=params)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class _Holding:
    """A runner that resolves held ids before its inner runner sees the call."""

    __slots__ = ("_runner", "_holdings")

    def __init__(self, runner: NodeRunner, holdings: Mapping[str, Any]) -> None:
        self._runner = runner
        self._holdings = holdings

    async def run(self, call: NodeCall) -> NodeResult:
        resolved = resolve_held(call, self._holdings)
        if isinstance(resolved, str):
            return NodeResult(None, error=resolved)
        return await self._runner.run(resolved)


class _FrameHolding(_Holding):
    """:class:`_Holding` for a frame runner: generator calls read nothing held, and pass through."""

    __slots__ = ()

    async def run_frames(self, call: NodeCall, emit: Emit) -> NodeResult:
        assert isinstance(self._runner, FrameRunner)
        return await self._runner.run_frames(call, emit)


def holding(runner: NodeRunner, holdings: Mapping[str, Any]) -> NodeRunner:
    """``runner`` giving ``holdings`` (a task's, by id) to the calls that read held data.
    A runner already holding the same data is returned as it is."""
    if isinstance(runner, _Holding) and runner._holdings == holdings:
        return runner
    wrapper = _FrameHolding if isinstance(runner, FrameRunner) else _Holding
    return wrapper(runner, holdings)
