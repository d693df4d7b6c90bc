"""MinerClient: signed requests a real receiver accepts, and every peer failure as a Reply holding its typed error."""

from __future__ import annotations

import asyncio
import json

import bittensor as bt
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from protocol.limits import Limits
from protocol.synapse import NodeResponse, NodeSynapse, TaskPackage
from support.keys import dev_keypair
from support.peers import CLOSE, GARBAGE, HANG, endless, raw_peer, reply_with, serve_asgi, slow
from validator import errors
from validator.client import ClientConfig, MinerClient

VALIDATOR = dev_keypair("Alice")
MINER = dev_keypair("Bob")


def _verifying_app(store: bt.http_auth.InMemoryNonceStore) -> Starlette:
    """A receiver that authenticates like a miner and reports what it verified."""

    async def endpoint(request: Request) -> JSONResponse:
        body = await request.body()
        try:
            caller = bt.http_auth.verify(
                request.headers,
                body,
                method=request.method,
                path=request.url.path,
                self_hotkey_ss58=MINER.ss58_address,
                nonce_store=store,
            )
        except bt.http_auth.AuthError as exc:
            return JSONResponse({"error": type(exc).__name__}, status_code=401)
        return JSONResponse({"caller": caller.hotkey_ss58, "nonce": caller.nonce_ns, "body": json.loads(body)})

    return Starlette(
        routes=[
            Route("/WorkflowSynapse", endpoint, methods=["POST"]),
            Route("/NodeSynapse", endpoint, methods=["POST"]),
        ]
    )


def _node(**params: object) -> NodeSynapse:
    return NodeSynapse(task_id="t1", node_id="n1", subnet="sn1", action="echo", params=params)


def _package() -> TaskPackage:
    return TaskPackage(task_id="t1", task_type="rag", description="find a fact")


async def test_signature_verifies_at_a_real_receiver_and_every_request_has_a_fresh_nonce() -> None:
    store = bt.http_auth.InMemoryNonceStore()
    package = _package()
    async with serve_asgi(_verifying_app(store)) as url, MinerClient(VALIDATOR) as client:
        first = await client.query_workflow(url, MINER.ss58_address, package)
        second = await client.call_node(url, MINER.ss58_address, _node(text="hi"))
        third = await client.call_node(url, MINER.ss58_address, _node(text="hi"))
    assert first.ok and first.status == 200, first.error
    answers = [json.loads(reply.body) for reply in (first, second, third)]
    assert {a["caller"] for a in answers} == {VALIDATOR.ss58_address}
    assert answers[0]["body"]["task_id"] == "t1"
    assert answers[1]["body"]["params"] == {"text": "hi"}
    assert len({a["nonce"] for a in answers}) == 3  # identical bodies, still no replay
    assert second.ok and third.ok


async def test_request_signed_for_another_receiver_is_rejected_and_reported() -> None:
    store = bt.http_auth.InMemoryNonceStore()
    async with serve_asgi(_verifying_app(store)) as url, MinerClient(VALIDATOR) as client:
        reply = await client.call_node(url, VALIDATOR.ss58_address, _node())
    assert reply.status == 401
    assert isinstance(reply.error, errors.PeerBadStatus) and reply.error.status == 401
    assert "WrongReceiver" in reply.error.excerpt and str(reply.error).startswith("http 401: ")
    assert (reply.error.url, reply.error.hotkey) == (url, VALIDATOR.ss58_address)
    assert not reply.retryable


async def test_a_peer_that_never_answers_times_out_as_a_reply() -> None:
    async with raw_peer(HANG) as peer, MinerClient(VALIDATOR) as client:
        reply = await client.call_node(peer.url, MINER.ss58_address, _node(), timeout_s=0.3)
    assert reply.status is None and reply.body is None
    assert isinstance(reply.error, errors.PeerTimeout) and reply.error.limit_s == 0.3
    assert str(reply.error) == "timeout after 0.3s"
    assert (reply.error.url, reply.error.hotkey) == (peer.url, MINER.ss58_address)
    assert not reply.retryable


async def test_a_per_request_timeout_overrides_the_default_in_both_directions() -> None:
    async with raw_peer(slow(0.4)) as peer, MinerClient(VALIDATOR, config=ClientConfig(timeout_s=0.1)) as client:
        patient = await client.call_node(peer.url, MINER.ss58_address, _node(), timeout_s=5.0)
        hasty = await client.call_node(peer.url, MINER.ss58_address, _node())
    assert patient.ok, patient.error
    assert isinstance(hasty.error, errors.PeerTimeout) and str(hasty.error) == "timeout after 0.1s"


@pytest.mark.parametrize("content_length", [True, False], ids=["declared", "chunked"])
async def test_oversize_body_is_an_error(content_length: bool) -> None:
    limits = Limits(max_response_bytes=1000)
    behaviour = reply_with(200, b"[" + b"1," * 1000 + b"1]", content_length=content_length)
    async with raw_peer(behaviour) as peer, MinerClient(VALIDATOR, limits=limits) as client:
        reply = await client.call_node(peer.url, MINER.ss58_address, _node())
    assert reply.body is None
    assert isinstance(reply.error, errors.PeerOversize) and reply.error.limit_bytes == 1000
    assert reply.error.declared == (len(b"[" + b"1," * 1000 + b"1]") if content_length else None)
    assert str(reply.error).startswith("response over 1000 bytes")
    assert not reply.retryable


async def test_endless_body_is_cut_off_without_reading_it_all() -> None:
    limits = Limits(max_response_bytes=256 * 1024)
    async with raw_peer(endless()) as peer, MinerClient(VALIDATOR, limits=limits) as client:
        reply = await client.call_node(peer.url, MINER.ss58_address, _node(), timeout_s=5)
    assert isinstance(reply.error, errors.PeerOversize) and str(reply.error) == "response over 262144 bytes"
    assert reply.body is None


async def test_connection_closed_without_response_is_a_retryable_error() -> None:
    async with raw_peer(CLOSE) as peer, MinerClient(VALIDATOR) as client:
        reply = await client.call_node(peer.url, MINER.ss58_address, _node())
    assert reply.status is None
    assert isinstance(reply.error, errors.PeerClosed) and str(reply.error).startswith("connection closed: ")
    assert reply.error.__cause__ is not None  # httpx's own exception, kept as evidence
    assert reply.retryable


async def test_a_query_is_tried_again_once_when_the_miner_closes_the_connection_unanswered() -> None:
    """The keep-alive race: the miner drops the connection as the query goes out."""
    closes = 1

    async def close_then_answer(reader, writer, stop) -> None:
        nonlocal closes
        if closes:
            closes -= 1
            await CLOSE(reader, writer, stop)
        else:
            await reply_with(200, b'{"ok": true}')(reader, writer, stop)

    async with raw_peer(close_then_answer) as flaky, raw_peer(CLOSE) as gone, MinerClient(VALIDATOR) as client:
        recovered = await client.query_workflow(flaky.url, MINER.ss58_address, _package())
        lost = await client.query_workflow(gone.url, MINER.ss58_address, _package())
    assert recovered.ok and recovered.body == b'{"ok": true}' and flaky.connections == 2
    assert isinstance(lost.error, errors.PeerClosed) and gone.connections == 2  # once more, not forever


async def test_nobody_listening_is_a_retryable_connect_error() -> None:
    async with raw_peer(HANG) as peer:
        url = peer.url
    async with MinerClient(VALIDATOR) as client:
        reply = await client.call_node(url, MINER.ss58_address, _node())
    assert isinstance(reply.error, errors.PeerRefused) and str(reply.error).startswith("connect error: ")
    assert reply.error.url == url
    assert reply.retryable


async def test_server_error_is_retryable_and_client_error_is_not() -> None:
    async with (
        raw_peer(reply_with(503, b'{"error":"busy"}')) as busy,
        raw_peer(reply_with(422, b'{"error":"bad field"}')) as picky,
        MinerClient(VALIDATOR) as client,
    ):
        unavailable = await client.call_node(busy.url, MINER.ss58_address, _node())
        rejected = await client.call_node(picky.url, MINER.ss58_address, _node())
    assert unavailable.status == 503 and unavailable.retryable
    assert isinstance(unavailable.error, errors.PeerBadStatus) and unavailable.error.status == 503
    assert str(unavailable.error) == 'http 503: {"error":"busy"}'
    assert rejected.status == 422 and not rejected.retryable
    assert isinstance(rejected.error, errors.PeerBadStatus) and rejected.error.status == 422
    assert rejected.body == b'{"error":"bad field"}'


async def test_garbage_is_returned_as_bytes_for_the_caller_to_judge() -> None:
    async with raw_peer(GARBAGE) as peer, MinerClient(VALIDATOR) as client:
        reply = await client.call_node(peer.url, MINER.ss58_address, _node())
    assert reply.ok and reply.body == b"\x00\xffnot json at all{{{"
    with pytest.raises(errors.PeerBadPayload) as raised:
        reply.parsed(NodeResponse, "node response")
    assert str(raised.value).startswith("malformed node response: ") and "JSON" in raised.value.evidence
    assert (raised.value.url, raised.value.hotkey) == (peer.url, MINER.ss58_address)


async def test_json_of_the_wrong_shape_is_a_bad_payload_naming_the_field() -> None:
    async with raw_peer(reply_with(200, b'{"output": null, "cost_tao": -1}')) as peer, MinerClient(VALIDATOR) as client:
        reply = await client.call_node(peer.url, MINER.ss58_address, _node())
    assert reply.ok
    with pytest.raises(errors.PeerBadPayload, match="cost_tao"):
        reply.parsed(NodeResponse, "node response")


async def test_an_unrequested_encoding_is_refused_before_the_body_is_read() -> None:
    behaviour = reply_with(200, b"\x1f\x8b" + b"x" * 100, headers=("Content-Encoding: gzip",))
    async with raw_peer(behaviour) as peer, MinerClient(VALIDATOR) as client:
        reply = await client.call_node(peer.url, MINER.ss58_address, _node())
    assert isinstance(reply.error, errors.PeerBadEncoding) and reply.error.encoding == "gzip"
    assert str(reply.error) == "unrequested content-encoding gzip" and reply.body is None
    assert not reply.retryable


async def test_a_request_over_the_limit_is_never_sent() -> None:
    async with raw_peer(HANG) as peer, MinerClient(VALIDATOR, limits=Limits(max_request_bytes=200)) as client:
        reply = await client.call_node(peer.url, MINER.ss58_address, _node(text="x" * 500))
    assert isinstance(reply.error, errors.RequestOversize) and reply.error.limit_bytes == 200
    assert reply.error.size > 500 and peer.connections == 0


async def test_malformed_url_is_an_error_not_an_exception() -> None:
    async with MinerClient(VALIDATOR) as client:
        reply = await client.call_node("not a url", MINER.ss58_address, _node())
    assert isinstance(reply.error, errors.PeerTransportError) and reply.status is None
    assert isinstance(reply.error, errors.PeerError) and not reply.retryable


async def test_concurrency_is_bounded() -> None:
    config = ClientConfig(max_concurrency=2)
    async with raw_peer(slow(0.05)) as peer, MinerClient(VALIDATOR, config=config) as client:
        replies = await asyncio.gather(*(client.call_node(peer.url, MINER.ss58_address, _node()) for _ in range(6)))
    assert all(reply.ok for reply in replies)
    assert peer.max_active == 2


async def test_using_a_closed_client_is_a_programming_error() -> None:
    client = MinerClient(VALIDATOR)
    with pytest.raises(RuntimeError, match="not open"):
        await client.call_node("http://127.0.0.1:1", MINER.ss58_address, _node())
