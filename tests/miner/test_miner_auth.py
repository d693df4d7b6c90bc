"""Every way a request can be refused before a handler runs, over real HTTP with real signatures."""

from __future__ import annotations

import asyncio
import json

import pytest

from miner.serving import EVERY_TOOL
from miner.settings import MinerSettings, RateLimit
from support.keys import MetagraphBuilder, dev_keypair, fresh_keypair, signed_headers
from support.miner import MinerUnderTest, running_miner

NODE = {"task_id": "t1", "node_id": "n1", "subnet": "sn1", "action": "echo", "params": {"text": "hi"}}
BODY = json.dumps(NODE).encode()


def _assert_refused(response, status: int, reason: str) -> None:
    assert response.status_code == status, response.text
    payload = response.json()
    assert payload["reason"] == reason
    assert payload["error"]


async def test_valid_signature_is_served(miner_server: MinerUnderTest) -> None:
    response = await miner_server.post("/NodeSynapse", BODY)
    assert response.status_code == 200
    assert response.json()["output"]["text"] == "hi"


async def test_missing_headers_are_malformed(miner_server: MinerUnderTest) -> None:
    response = await miner_server.post("/NodeSynapse", BODY, headers={"Content-Type": "application/json"})
    _assert_refused(response, 401, "malformed")


async def test_forged_signature_is_refused(miner_server: MinerUnderTest) -> None:
    headers = signed_headers(miner_server.validator, miner_server.keypair, "/NodeSynapse", BODY)
    signature = headers["X-Bittensor-Signature"]
    headers["X-Bittensor-Signature"] = signature[:-2] + ("00" if signature[-2:] != "00" else "11")
    response = await miner_server.post("/NodeSynapse", BODY, headers=headers)
    _assert_refused(response, 401, "bad_signature")


async def test_tampered_body_is_refused(miner_server: MinerUnderTest) -> None:
    headers = signed_headers(miner_server.validator, miner_server.keypair, "/NodeSynapse", BODY)
    tampered = BODY.replace(b'"hi"', b'"ho"')
    response = await miner_server.post("/NodeSynapse", tampered, headers=headers)
    _assert_refused(response, 401, "bad_signature")


async def test_signature_for_another_path_is_refused(miner_server: MinerUnderTest) -> None:
    headers = signed_headers(miner_server.validator, miner_server.keypair, "/WorkflowSynapse", BODY)
    response = await miner_server.post("/NodeSynapse", BODY, headers=headers)
    _assert_refused(response, 401, "bad_signature")


async def test_wrong_receiver_is_refused(miner_server: MinerUnderTest) -> None:
    response = await miner_server.post("/NodeSynapse", BODY, receiver=dev_keypair("Charlie"))
    _assert_refused(response, 401, "wrong_receiver")


async def test_stale_nonce_is_refused(miner_server: MinerUnderTest) -> None:
    response = await miner_server.post("/NodeSynapse", BODY, age_s=60)
    _assert_refused(response, 401, "stale")


async def test_replayed_nonce_is_refused(miner_server: MinerUnderTest) -> None:
    headers = signed_headers(miner_server.validator, miner_server.keypair, "/NodeSynapse", BODY)
    first = await miner_server.post("/NodeSynapse", BODY, headers=headers)
    second = await miner_server.post("/NodeSynapse", BODY, headers=headers)
    assert first.status_code == 200
    _assert_refused(second, 401, "replayed")


async def test_unregistered_hotkey_is_forbidden(miner_server: MinerUnderTest) -> None:
    response = await miner_server.post("/NodeSynapse", BODY, signer=fresh_keypair())
    _assert_refused(response, 403, "unregistered")


async def test_neuron_without_validator_permit_is_forbidden() -> None:
    alice, bob, eve = dev_keypair("Alice"), dev_keypair("Bob"), dev_keypair("Eve")
    snapshot = MetagraphBuilder().validator(alice).miner(bob).miner(eve, stake=10_000.0).build()
    async with running_miner(snapshot=snapshot) as miner:
        response = await miner.post("/NodeSynapse", BODY, signer=eve)
    _assert_refused(response, 403, "no_validator_permit")


async def test_permit_requirement_can_be_switched_off() -> None:
    alice, bob, eve = dev_keypair("Alice"), dev_keypair("Bob"), dev_keypair("Eve")
    snapshot = MetagraphBuilder().validator(alice).miner(bob).miner(eve).build()
    settings = MinerSettings(serve=EVERY_TOOL, require_validator_permit=False)
    async with running_miner(settings=settings, snapshot=snapshot) as miner:
        response = await miner.post("/NodeSynapse", BODY, signer=eve)
    assert response.status_code == 200


async def test_stake_below_minimum_is_forbidden() -> None:
    alice, bob, dave = dev_keypair("Alice"), dev_keypair("Bob"), dev_keypair("Dave")
    snapshot = MetagraphBuilder().validator(alice, stake=5_000.0).miner(bob).validator(dave, stake=99.0).build()
    async with running_miner(settings=MinerSettings(serve=EVERY_TOOL, min_stake=100.0), snapshot=snapshot) as miner:
        poor = await miner.post("/NodeSynapse", BODY, signer=dave)
        rich = await miner.post("/NodeSynapse", BODY, signer=alice)
    _assert_refused(poor, 403, "stake_below_minimum")
    assert rich.status_code == 200


async def test_unsynced_metagraph_answers_503_until_it_syncs() -> None:
    async with running_miner(snapshot=None) as miner:
        before = await miner.post("/NodeSynapse", BODY)
        miner.metagraph.update(MetagraphBuilder().validator(miner.validator).miner(miner.keypair).build())
        after = await miner.post("/NodeSynapse", BODY)
    _assert_refused(before, 503, "not_synced")
    assert after.status_code == 200


async def test_rate_limit_answers_429_with_retry_after() -> None:
    settings = MinerSettings(serve=EVERY_TOOL, rate_limit=RateLimit(per_second=0.01, burst=2))
    async with running_miner(settings=settings) as miner:
        statuses = [(await miner.post("/NodeSynapse", BODY)).status_code for _ in range(2)]
        limited = await miner.post("/NodeSynapse", BODY)
    assert statuses == [200, 200]
    _assert_refused(limited, 429, "rate_limited")
    assert int(limited.headers["retry-after"]) >= 1


async def test_rate_limit_is_per_hotkey() -> None:
    alice, bob, dave = dev_keypair("Alice"), dev_keypair("Bob"), dev_keypair("Dave")
    snapshot = MetagraphBuilder().validator(alice).miner(bob).validator(dave).build()
    settings = MinerSettings(serve=EVERY_TOOL, rate_limit=RateLimit(per_second=0.01, burst=1))
    async with running_miner(settings=settings, snapshot=snapshot) as miner:
        first = await miner.post("/NodeSynapse", BODY, signer=alice)
        again = await miner.post("/NodeSynapse", BODY, signer=alice)
        other = await miner.post("/NodeSynapse", BODY, signer=dave)
    assert (first.status_code, again.status_code, other.status_code) == (200, 429, 200)


async def test_oversize_body_with_content_length_is_413() -> None:
    async with running_miner(settings=MinerSettings(serve=EVERY_TOOL, max_body_bytes=1024)) as miner:
        big = json.dumps({**NODE, "params": {"text": "x" * 2000}}).encode()
        response = await miner.post("/NodeSynapse", big)
    _assert_refused(response, 413, "body_too_large")


async def test_oversize_chunked_body_is_413_before_the_body_ends() -> None:
    async with running_miner(settings=MinerSettings(serve=EVERY_TOOL, max_body_bytes=1024)) as miner:
        host, port = miner.url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        headers = signed_headers(miner.validator, miner.keypair, "/NodeSynapse", b"")
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        writer.write(f"POST /NodeSynapse HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n{head}\r\n".encode())
        for _ in range(4):  # 2 KiB in chunks, and never the final zero-length chunk
            writer.write(b"200\r\n" + b" " * 512 + b"\r\n")
        await writer.drain()
        status_line = await reader.readline()
        rest = await reader.read(4096)
        writer.close()
    assert status_line.split()[1] == b"413"
    assert b"body_too_large" in rest


async def test_public_paths_need_no_signature() -> None:
    async with running_miner(snapshot=None) as miner:
        health = await miner.get("/health")
        metrics = await miner.get("/metrics")
    assert health.status_code == 503 and health.json()["status"] == "not_ready"  # answered, not refused: no metagraph
    assert metrics.status_code == 200


@pytest.mark.parametrize("path", ["/NodeSynapse", "/WorkflowSynapse", "/docs", "/nowhere"])
async def test_every_other_path_needs_a_signature(miner_server: MinerUnderTest, path: str) -> None:
    response = await miner_server.client.post(miner_server.url + path, content=b"{}")
    _assert_refused(response, 401, "malformed")


async def test_auth_failures_are_counted_by_reason(miner_server: MinerUnderTest) -> None:
    await miner_server.post("/NodeSynapse", BODY, age_s=60)
    await miner_server.post("/NodeSynapse", BODY, signer=fresh_keypair())
    text = (await miner_server.get("/metrics")).text
    assert 'dagnet_miner_auth_failures_total{reason="stale"} 1.0' in text
    assert 'dagnet_miner_blacklisted_total{reason="unregistered"} 1.0' in text
    assert 'dagnet_miner_requests_total{code="401",endpoint="/NodeSynapse"} 1.0' in text
    assert 'dagnet_miner_requests_total{code="403",endpoint="/NodeSynapse"} 1.0' in text
