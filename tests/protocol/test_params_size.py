"""Bounded work per node, decided before anything is built or sent.

``CompiledParams.resolved_size`` gives the JSON size of a node's resolved params
from the sizes of the outputs it references, so the executor can refuse a node
whose params would be huge without ever building them; the client refuses to
send any request body over its cap.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from protocol.dataref import DataRefError, compile_params
from protocol.limits import Limits
from protocol.synapse import NodeSynapse
from support.keys import dev_keypair
from support.peers import HANG, raw_peer
from support.scale import examples
from validator.client import MinerClient
from validator.errors import RequestOversize

OUTPUTS: dict[str, Any] = {
    "a": {
        "text": 'héllo "world"\n',
        "artifacts": {"code": "print(1)", "metadata": {"n": [1, 2.5, None], "s": "\u2028"}},
    },
    "b": {"text": "x" * 1000, "artifacts": {"code": "", "metadata": {}}},
}
_REFS = [
    "${a.output.text}",
    "${a.output.artifacts}",
    "${a.output.artifacts.metadata.n}",
    "${a.output.artifacts.metadata.n.1}",
    "${b.output.text}",
    "${b.output.artifacts}",
]
_strings = st.lists(st.one_of(st.sampled_from(_REFS), st.text(max_size=6), st.just("$${")), max_size=4).map("".join)
_values = st.recursive(
    st.none() | st.booleans() | st.integers() | _strings,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3),
    max_leaves=12,
)


def _json_len(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


@settings(max_examples=examples(300), deadline=None)
@given(params=st.dictionaries(st.text(max_size=4), _values, max_size=4))
def test_resolved_size_is_the_size_of_what_resolve_builds(params: dict[str, Any]) -> None:
    try:
        compiled = compile_params(params)
    except DataRefError:
        assume(False)  # random text happened to write a malformed ref
    size = compiled.resolved_size(OUTPUTS)
    actual = _json_len(compiled.resolve(OUTPUTS))
    # exact, except that each "$${" escape is counted as written (one character more)
    assert actual <= size <= actual + json.dumps(params).count("$${")


def test_repeated_whole_refs_are_sized_without_being_built() -> None:
    """The amplification plan's node: 10,000 whole-value refs to a 1 KB output."""
    compiled = compile_params({"items": ["${b.output.artifacts}", "${b.output.text}"] * 5_000})
    cache: dict = {}
    per_pair = _json_len(OUTPUTS["b"]["artifacts"]) + _json_len(OUTPUTS["b"]["text"])
    assert compiled.resolved_size(OUTPUTS, cache) == len('{"items":[]}') + 5_000 * per_pair + 9_999
    assert len(cache) == 2  # each referenced value was measured once


async def test_a_request_body_over_the_cap_is_refused_unsent() -> None:
    node = NodeSynapse(task_id="t", node_id="n", subnet="s", action="echo", params={"text": "x" * 5_000})
    async with (
        raw_peer(HANG) as peer,
        MinerClient(dev_keypair("Alice"), limits=Limits(max_request_bytes=4_096)) as client,
    ):
        reply = await client.call_node(peer.url, dev_keypair("Bob").ss58_address, node)
    assert not reply.ok and not reply.retryable
    assert isinstance(reply.error, RequestOversize) and "over the 4096-byte limit; not sent" in str(reply.error)
    assert peer.connections == 0
