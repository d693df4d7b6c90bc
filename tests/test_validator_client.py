"""MinerClient: signed requests a real receiver accepts, and every peer failure as a Reply."""

from __future__ import annotations

import asyncio
import json

import bittensor as bt
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from support.keys import dev_keypair
from support.peers import CLOSE, GARBAGE, HANG, endless, raw_peer, reply_with, serve_asgi, slow

from protocol.limits import Limits
from protocol.synapse import NodeSynapse, TaskPackage
from validator.client import ClientConfig, MinerClient

VALIDATOR = dev_keypair("Alice")
MINER = dev_keypair("Bob")


def _verifying_app(store: bt.http_auth.InMemoryNonceStore) -> Starlette:
    """A receiver that authenticates like a miner and reports what it verified."""

    async def endpoint(request: Request) -> JSONResponse:
        body = await request.body()
        try:
            caller = bt.http_auth.verify(
                request.headers, body, method=request.method, path=request.url.path,
                self_hotkey_ss58=MINER.ss58_address, nonce_store=store,
            )
        except bt.http_auth.AuthError as exc:
            return JSONResponse({"error": type(exc).__name__}, status_code=401)
        return JSONResponse({"caller": caller.hotkey_ss58, "nonce": caller.nonce_ns, "body": json.loads(body)})

    return Starlette(routes=[Route("/WorkflowSynapse", endpoint, methods=["POST"]),
                             Route("/NodeSynapse", endpoint, methods=["POST"])])


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
    assert reply.error is not None and "WrongReceiver" in reply.error
    assert not reply.retryable


async def test_a_peer_that_never_answers_times_out_as_a_reply() -> None:
    async with raw_peer(HANG) as peer, MinerClient(VALIDATOR) as client:
        reply = await client.call_node(peer.url, MINER.ss58_address, _node(), timeout_s=0.3)
    assert reply.status is None and reply.body is None
    assert reply.error == "timeout after 0.3s"
    assert not reply.retryable


async def test_a_per_request_timeout_overrides_the_default_in_both_directions() -> None:
    async with raw_peer(slow(0.4)) as peer, MinerClient(VALIDATOR, config=ClientConfig(timeout_s=0.1)) as client:
        patient = await client.call_node(peer.url, MINER.ss58_address, _node(), timeout_s=5.0)
        hasty = await client.call_node(peer.url, MINER.ss58_address, _node())
    assert patient.ok, patient.error
    assert hasty.error == "timeout after 0.1s"


@pytest.mark.parametrize("content_length", [True, False], ids=["declared", "chunked"])
async def test_oversize_body_is_an_error(content_length: bool) -> None:
    limits = Limits(max_response_bytes=1000)
    behaviour = reply_with(200, b"[" + b"1," * 1000 + b"1]", content_length=content_length)
    async with raw_peer(behaviour) as peer, MinerClient(VALIDATOR, limits=limits) as client:
        reply = await client.call_node(peer.url, MINER.ss58_address, _node())
    assert reply.body is None
    assert reply.error is not None and reply.error.startswith("response over 1000 bytes")


async def test_endless_body_is_cut_off_without_reading_it_all() -> None:
    limits = Limits(max_response_bytes=256 * 1024)
    async with raw_peer(endless()) as peer, MinerClient(VALIDATOR, limits=limits) as client:
        reply = await client.call_node(peer.url, MINER.ss58_address, _node(), timeout_s=5)
    assert reply.error == "response over 262144 bytes"
    assert reply.body is None


async def test_connection_closed_without_response_is_a_retryable_error() -> None:
    async with raw_peer(CLOSE) as peer, MinerClient(VALIDATOR) as client:
        reply = await client.call_node(peer.url, MINER.ss58_address, _node())
    assert reply.status is None
    assert reply.error is not None and reply.error.startswith("connection closed")
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
    assert lost.error.startswith("connection closed") and gone.connections == 2  # once more, not forever


async def test_nobody_listening_is_a_retryable_connect_error() -> None:
    async with raw_peer(HANG) as peer:
        url = peer.url
    async with MinerClient(VALIDATOR) as client:
        reply = await client.call_node(url, MINER.ss58_address, _node())
    assert reply.error is not None and reply.error.startswith("connect error")
    assert reply.retryable


async def test_server_error_is_retryable_and_client_error_is_not() -> None:
    async with raw_peer(reply_with(503, b'{"error":"busy"}')) as busy, \
            raw_peer(reply_with(422, b'{"error":"bad field"}')) as picky, MinerClient(VALIDATOR) as client:
        unavailable = await client.call_node(busy.url, MINER.ss58_address, _node())
        rejected = await client.call_node(picky.url, MINER.ss58_address, _node())
    assert unavailable.status == 503 and unavailable.retryable
    assert unavailable.error == 'http 503: {"error":"busy"}'
    assert rejected.status == 422 and not rejected.retryable
    assert rejected.body == b'{"error":"bad field"}'


async def test_garbage_is_returned_as_bytes_for_the_caller_to_judge() -> None:
    async with raw_peer(GARBAGE) as peer, MinerClient(VALIDATOR) as client:
        reply = await client.call_node(peer.url, MINER.ss58_address, _node())
    assert reply.ok and reply.body == b"\x00\xffnot json at all{{{"


async def test_malformed_url_is_an_error_not_an_exception() -> None:
    async with MinerClient(VALIDATOR) as client:
        reply = await client.call_node("not a url", MINER.ss58_address, _node())
    assert reply.error is not None and reply.status is None


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
