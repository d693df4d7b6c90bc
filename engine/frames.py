"""Frames (protocol.frames): what the run knows about each generator's frame-scoped
nodes, the frame limits, and the edges of each frame instance it adds."""

from __future__ import annotations

from protocol.output import NodeOutput
from protocol.plan import PlanNode
from protocol.validation import PlanCheck

from .model import ExecutorConfig
from .nodes import _Node

__all__ = ["_Frames"]


class _Frames:
    """What the run knows about frames: each generator's scoped nodes (in topological
    order), each node's edges and spec, the frame limits; and the frame instances,
    made as their frames arrive."""

    __slots__ = ("members", "specs", "_preds", "_nodes", "_max_frames", "_instances_left", "_max_instances")

    def __init__(
        self,
        specs: list[PlanNode],
        preds: list[list[int]],
        check: PlanCheck,
        nodes: list[_Node],
        config: ExecutorConfig,
    ) -> None:
        graph = check.graph
        assert graph is not None
        self.members = {
            graph.index[generator]: [nodes[graph.index[member]] for member in members]
            for generator, members in check.frames.members.items()
        }
        self.specs = specs
        self._preds = preds
        self._nodes = nodes
        self._max_frames = config.max_frames
        self._max_instances = self._instances_left = config.max_frame_instances

    def refuse(self, generator: _Node, output: object) -> str | None:
        """Why this frame is refused, or None after counting its instances."""
        if not isinstance(output, NodeOutput):
            return f"malformed frame ({type(output).__name__})"
        if len(generator.emitted) >= self._max_frames:  # type: ignore[arg-type]
            return f"frame_limit:{self._max_frames}"
        needed = len(self.members[generator.index])
        if needed > self._instances_left:
            return f"frame_instance_limit:{self._max_instances}"
        self._instances_left -= needed
        return None

    def add(self, generator: _Node, output: NodeOutput) -> list[tuple[_Node, _Node]]:
        """Keep ``generator``'s new frame and make each scoped node's instance on it,
        appended to the run's nodes; returns (scoped node, instance) pairs in order."""
        frame = len(generator.emitted)  # type: ignore[arg-type]
        generator.emitted.append(output.as_dict())  # type: ignore[union-attr]
        added: list[tuple[_Node, _Node]] = []
        for member in self.members[generator.index]:
            inst = member.instance(frame, len(self._nodes))
            self._nodes.append(inst)
            member.per_frame.append(inst)  # type: ignore[union-attr]
            added.append((member, inst))
        return added

    def preds(self, member: _Node, frame: int) -> list[int]:
        """What ``member``'s instance on ``frame`` waits for: the instances on the same
        frame of its scoped predecessors, and its other predecessors themselves (never
        the generator: the frame is already there)."""
        generator = member.generator
        out = []
        for p in self._preds[member.index]:
            pred = self._nodes[p]
            if pred is generator:
                continue
            if pred.per_frame is not None and pred.generator is generator:
                out.append(pred.per_frame[frame].index)
            else:
                out.append(p)
        return out
