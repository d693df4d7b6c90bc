"""Running a node on the tool providers of its subnet, over the signed HTTP client.

:class:`RemoteRunner` is the validator's :class:`~protocol.runner.NodeRunner`
for real executions: for each node it asks the ``top_k`` providers the task's
routing policy names for that subnet, all at once, and aggregates what comes
back. Run on its own (:meth:`RemoteRunner.run`), the node takes as long as its slowest
provider and costs the sum of what they charged. That is what the providers *say*: the
validator's loop never takes it as it is, it judges each provider's answer as it
arrives (:meth:`RemoteRunner.asking`) by the trust rules of :mod:`validator.adapters`.

Which peers provide a subnet is a function (:data:`ProviderSelector`): on a
real network it comes from partner subnets; on a local network every miner
serves every subnet (:func:`every_peer_serves`).

A generator node (:meth:`RemoteRunner.run_frames`) goes to one provider, the
first chosen: frames from several providers have nothing to be voted on frame by
frame. Its frames come in that provider's one response, so they reach the
executor together when the response arrives, not one by one as the provider
makes them (docs/protocol.md, generator calls).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from engine.routing import combine
from protocol.errors import format_validation_error
from protocol.metagraph import Peer
from protocol.runner import Emit, NodeCall, NodeResult
from protocol.synapse import Aggregation, NodeResponse, NodeSynapse, TaskPackage

from .client import MinerClient, Reply
from .errors import PeerBadPayload

ProviderSelector = Callable[[str], Sequence[Peer]]
"""``subnet -> providers`` in preference order; the runner uses the first ``top_k``."""

TIMEOUT_MARGIN_S = 0.5
"""Added to a node's own timeout for the HTTP request, so the executor's attempt
timeout fires first and the attempt is counted as a timeout."""


def every_peer_serves(peers: Sequence[Peer], *, offset: int = 0) -> ProviderSelector:
    """Local networks: every peer serves every subnet.

    The list is rotated by ``offset`` so that callers (e.g. one runner per
    executed plan) can spread their load over different providers first.
    """
    pool = tuple(peers)
    cut = offset % len(pool) if pool else 0
    ordered = pool[cut:] + pool[:cut]
    return lambda subnet: ordered


class RemoteRunner:
    """A :class:`~protocol.runner.NodeRunner` that calls remote tool providers.

    Each provider's reply is validated as a :class:`NodeResponse` (so oversize or
    malformed output is a failed response, never truncated). Transport failures
    (connect error, connection closed, 5xx) are retried up to
    ``transport_retries`` times per provider with a freshly signed request, and
    each such retry is reported in ``unplanned_retries``.
    """

    def __init__(
        self,
        client: MinerClient,
        providers: ProviderSelector,
        package: TaskPackage,
        transport_retries: int = 1,
    ) -> None:
        if transport_retries < 0:
            raise ValueError("transport_retries must be >= 0")
        self._client = client
        self._providers = providers
        self._package = package
        self._transport_retries = transport_retries

    async def run(self, call: NodeCall) -> NodeResult:
        """The providers' answers aggregated by the routing rule, at the cost they claim:
        untrusted (the validator's loop judges the answers instead: :mod:`validator.adapters`)."""
        asked = await self.ask(call)
        if isinstance(asked, NodeResult):
            return asked
        return _combine([p for p, _ in asked], [a for _, a in asked], self._package.route(call.subnet).aggregation)

    async def ask(self, call: NodeCall) -> list[tuple[Peer, NodeResult]] | NodeResult:
        """Each of the ``top_k`` chosen providers with its answer (the cost it claims, the
        transport retries it took), all asked at once and all awaited; the failed result
        when there is no provider or no valid request."""
        asking = self.asking(call)
        if isinstance(asking, NodeResult):
            return asking
        answers = await asyncio.gather(*(answer for _, answer in asking))
        return [(peer, answer) for (peer, _), answer in zip(asking, answers)]

    def asking(self, call: NodeCall) -> list[tuple[Peer, Coroutine[Any, Any, NodeResult]]] | NodeResult:
        """Each of the ``top_k`` chosen providers with the request for its answer, not yet
        sent: the caller awaits as many as it needs (:mod:`validator.adapters` stops at the
        first confirmed answer). The failed result when there is no provider or no valid request."""
        chosen = list(self._providers(call.subnet))[: self._package.route(call.subnet).top_k]
        synapse = _request(call, chosen)
        if isinstance(synapse, NodeResult):
            return synapse
        timeout = call.timeout_seconds + TIMEOUT_MARGIN_S
        return [(peer, self._ask(peer, synapse, timeout)) for peer in chosen]

    async def run_frames(self, call: NodeCall, emit: Emit) -> NodeResult:
        """Run a generator node on the first provider; emit its frames in order once its answer is in."""
        chosen = list(self._providers(call.subnet))[:1]
        synapse = _request(call, chosen)
        if isinstance(synapse, NodeResult):
            return synapse
        answer = await self._ask(chosen[0], synapse, call.timeout_seconds + TIMEOUT_MARGIN_S)
        for frame in answer.frames or ():
            if not emit(frame):
                break
        return replace(answer, frames=None)

    async def _ask(self, provider: Peer, synapse: NodeSynapse, timeout: float) -> NodeResult:
        retries = 0
        while True:
            reply = await self._client.call_node(provider.url, provider.hotkey, synapse, timeout_s=timeout)
            if reply.retryable and retries < self._transport_retries:
                retries += 1
                continue
            if reply.error is not None:
                return NodeResult(None, error=str(reply.error), unplanned_retries=retries)
            return _answer(reply, retries)


def _request(call: NodeCall, chosen: Sequence[Peer]) -> NodeSynapse | NodeResult:
    """The request for ``call``, or the failed result when there is no provider or no valid request."""
    if not chosen:
        return NodeResult(output=None, error=f"no provider for subnet {call.subnet}")
    try:
        return NodeSynapse.of(call)
    except ValidationError as exc:
        return NodeResult(output=None, error=f"cannot build node request: {format_validation_error(exc)}")


def _answer(reply: Reply, retries: int) -> NodeResult:
    """A provider's answer from its ``ok`` reply; a malformed one is a failed attempt."""
    try:
        answer = reply.parsed(NodeResponse, "node response").result(unplanned_retries=retries)
    except PeerBadPayload as exc:
        return NodeResult(None, error=str(exc), unplanned_retries=retries)
    if answer.error is not None or answer.output is None:
        return replace(answer, output=None, error=answer.error or "provider returned no output")
    return answer


def _combine(providers: Sequence[Peer], answers: Sequence[NodeResult], aggregation: Aggregation) -> NodeResult:
    errors = "; ".join(f"uid {p.uid}: {a.error}" for p, a in zip(providers, answers))
    return combine(answers, aggregation, failed=errors if len(answers) > 1 else answers[0].error)
