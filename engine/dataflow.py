"""Data flow: the outputs of nodes that succeeded, and DataRef resolution at dispatch
(why a node is blocked, or its resolved params), frames included."""

from __future__ import annotations

from typing import Any

from protocol.dataref import INPUT, CompiledParams, MissingField

from .model import SUCCESS
from .nodes import _Node

__all__ = ["_DataFlow"]


class _DataFlow:
    """The outputs of nodes that succeeded, and what they mean for the nodes that refer to them."""

    __slots__ = ("outputs", "_compiled", "_max_params", "_sizes")

    def __init__(self, compiled: dict[str, CompiledParams], max_params_bytes: int) -> None:
        self.outputs: dict[str, dict[str, Any]] = {}  # node id -> NodeOutput.as_dict(); INPUT -> the inputs
        self._compiled = compiled
        self._max_params = max_params_bytes
        self._sizes: dict[tuple[str, bool], int] = {}  # JSON size per referenced value, measured once

    def block_reason(self, node: _Node) -> str | None:
        """Why ``node`` cannot run (a referenced node did not succeed, a field is missing,
        its params would pass ``max_params_bytes``).

        Called only when every ancestor has settled (the scheduler's invariant), so
        the answer never depends on timing. Fills in ``node``'s resolved params; their
        size is decided from the sizes of the referenced values, before building them.
        """
        if node.frame is not None or node.gathers:
            return self._framed_reason(node)
        for source in node.sources:
            if source.status != SUCCESS:
                return f"ancestor_failed:{source.id}"
        compiled = self._compiled[node.id]
        try:
            size = compiled.resolved_size(self.outputs, self._sizes)
            if size > self._max_params:
                return f"params_too_large:{size}>{self._max_params}"
            node.params = compiled.resolve(self.outputs)
        except MissingField as exc:
            return f"missing_field:{exc}"
        return None

    def _framed_reason(self, node: _Node) -> str | None:
        """:meth:`block_reason` of a frame instance, whose refs read its own frame, or of
        a gather, whose params are resolved once per frame and given as ``{"frames": [...]}``.

        A frame's slice is its instance of each scoped source and the generator's
        frame itself; so a failure blocks only the instances of its own frame.
        """
        generator = node.generator
        if node.gathers and generator is not None and generator.status != SUCCESS:
            return f"ancestor_failed:{generator.id}"
        frames = _frames_read(node)
        for frame in frames:
            for source in node.sources:
                slot = _in_frame(source, frame)
                if slot is not generator and slot.status != SUCCESS:
                    return f"ancestor_failed:{slot.label}"
        compiled = self._compiled[node.id]
        try:
            slices = [self._slice(node, frame) for frame in frames]
            sizes = [compiled.resolved_size(values) for values in slices]
            size = _FRAMES_JSON + sum(sizes) + max(0, len(sizes) - 1) if node.gathers else sizes[0]
            if size > self._max_params:
                return f"params_too_large:{size}>{self._max_params}"
            resolved = [compiled.resolve(values) for values in slices]
        except MissingField as exc:
            return f"missing_field:{exc}"
        node.params = {"frames": resolved} if node.gathers else resolved[0]
        return None

    def _slice(self, node: _Node, frame: int | None) -> dict[str, Any]:
        """What ``node``'s refs read on ``frame``: each source's value there, and the inputs."""
        values: dict[str, Any] = {INPUT: self.outputs[INPUT]}
        for source in node.sources:
            if frame is not None and source.emitted is not None:
                values[source.id] = source.emitted[frame]
            elif frame is not None and source.per_frame is not None:
                values[source.id] = source.per_frame[frame].output
            else:
                values[source.id] = self.outputs.get(source.id)
        return values


_FRAMES_JSON = len('{"frames":[]}')


def _frames_read(node: _Node) -> list[int | None]:
    """The frames whose slices ``node`` reads: its own, or every one a gather joins."""
    if node.frame is not None:
        return [node.frame]
    if node.generator is not None and node.generator.emitted is not None:
        return list(range(len(node.generator.emitted)))
    return [None]


def _in_frame(source: _Node, frame: int | None) -> _Node:
    """``source`` as seen on ``frame``: its instance there when it is frame-scoped."""
    if frame is not None and source.per_frame is not None:
        return source.per_frame[frame]
    return source
