"""Which nodes of a plan run once per frame (docs/execution.md, generator nodes and frames).

A *generator* node (an action the catalogue marks ``generator``, e.g. ``split``)
yields several outputs, its frames. A node is *frame-scoped* under generator ``g``
when one of its DataRefs names ``g`` or a node already scoped under ``g``: it then
runs once per frame of ``g``, its refs reading that frame's slice. A *gather* node
(``collect``) that references such nodes runs once, after every frame, and joins
them in frame order. Everything else runs once, as usual.

Scopes follow DataRefs, never bare edges: an edge from a scoped node to a node that
does not reference it only makes that node wait for every frame.

Two shapes are refused, each blocking its node statically:

- ``mixed_frames:<g1>,<g2>``: one node references the frames of two generators
  (their frames do not pair up);
- ``nested_generator:<g>``: a generator inside another generator's frames.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .actions import ACTIONS
from .dataref import CompiledParams
from .graph import Graph

__all__ = ["FrameScopes", "frame_scopes"]


@dataclass
class FrameScopes:
    """Frame scopes of a plan's nodes, by node id."""

    generator_of: dict[str, str] = field(default_factory=dict)
    """Frame-scoped node -> the generator whose frames it runs on."""
    members: dict[str, list[str]] = field(default_factory=dict)
    """Generator -> the nodes scoped under it, in topological order (every generator listed)."""
    gathered: dict[str, str] = field(default_factory=dict)
    """Gather node -> the generator whose frames it joins (absent when it joins none)."""


def frame_scopes(
    graph: Graph, actions: list[str], compiled: Mapping[str, CompiledParams]
) -> tuple[FrameScopes, dict[str, str]]:
    """The frame scopes, and the node errors of nodes whose scope is refused.

    ``actions`` is each node's action by graph index; ``compiled`` holds the params
    of the nodes that are not statically blocked (a blocked node is never scoped).
    """
    scopes = FrameScopes()
    errors: dict[str, str] = {}
    for v in graph.topo_order():
        node_id, spec = graph.ids[v], ACTIONS.get(actions[v])
        if spec is not None and spec.generator:
            scopes.members[node_id] = []
        params = compiled.get(node_id)
        if params is None:
            continue
        found = _generators(params, scopes)
        if len(found) > 1:
            errors[node_id] = "mixed_frames:" + ",".join(found)
        elif spec is not None and spec.generator and found:
            errors[node_id] = f"nested_generator:{found[0]}"
        elif found and spec is not None and spec.gathers:
            scopes.gathered[node_id] = found[0]
        elif found:
            scopes.generator_of[node_id] = found[0]
            scopes.members[found[0]].append(node_id)
    return scopes, errors


def _generators(params: CompiledParams, scopes: FrameScopes) -> list[str]:
    """The generators whose frames ``params`` read, in order of first reference."""
    found: dict[str, None] = {}
    for ref in params.refs:
        if ref.is_input:
            continue
        if ref.node_id in scopes.members:
            found[ref.node_id] = None
        elif ref.node_id in scopes.generator_of:
            found[scopes.generator_of[ref.node_id]] = None
    return list(found)
