"""What a caller that goes away, or never proves who it is, costs the miner.

- A signed request whose client disconnects stops its work: the tool is cancelled
  and the concurrency slot is free again within a second, not at the plan's timeout.
- The signature headers are checked before the body is read: an unsigned (or
  misaddressed, or stale) request is refused with nothing of its body buffered.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from miner.serving import EVERY_TOOL
from miner.settings import MinerSettings
from support.keys import dev_keypair, signed_headers
from support.miner import running_miner

SLOTS = 4
ABANDON_AFTER_S = 1.0
FREED_WITHIN_S = 1.0


def _node(delay_s: float) -> bytes:
    return json.dumps(
        {
            "task_id": "t",
            "node_id": "n",
            "subnet": "sn1",
            "action": "echo",
            "params": {"text": "hi", "delay_s": delay_s},
            "timeout_seconds": 3600,
        }
    ).encode()


async def test_abandoned_slow_requests_free_their_slots_within_a_second() -> None:
    async with running_miner(settings=MinerSettings(port=0, serve=EVERY_TOOL, max_concurrency=SLOTS)) as miner:
        slow = _node(delay_s=3000)

        async def abandon() -> None:
            headers = signed_headers(miner.validator, miner.keypair, "/NodeSynapse", slow)
            async with httpx.AsyncClient(timeout=ABANDON_AFTER_S) as client:
                with pytest.raises(httpx.ReadTimeout):
                    await client.post(miner.url + "/NodeSynapse", content=slow, headers=headers)

        await asyncio.gather(*(abandon() for _ in range(SLOTS)))  # every slot taken, then left
        quick = _node(delay_s=0)
        headers = signed_headers(miner.validator, miner.keypair, "/NodeSynapse", quick)
        async with httpx.AsyncClient(timeout=FREED_WITHIN_S) as client:
            response = await client.post(miner.url + "/NodeSynapse", content=quick, headers=headers)
        assert response.status_code == 200 and response.json()["output"]["text"] == "hi"


async def test_the_timeout_a_validator_sends_bounds_the_work() -> None:
    async with running_miner() as miner:
        body = json.dumps(
            {
                "task_id": "t",
                "node_id": "n",
                "subnet": "sn1",
                "action": "echo",
                "params": {"text": "hi", "delay_s": 3000},
                "timeout_seconds": 0.2,
            }
        ).encode()
        async with httpx.AsyncClient(timeout=5.0) as client:  # far shorter than the tool's 3000 s
            headers = signed_headers(miner.validator, miner.keypair, "/NodeSynapse", body)
            response = await client.post(miner.url + "/NodeSynapse", content=body, headers=headers)
    assert response.status_code == 200 and "timed out after 0.2s" in response.json()["error"]


def _headers(case: str, miner) -> dict[str, str]:
    if case == "unsigned":
        return {}
    signer = dev_keypair("Eve") if case == "unregistered" else miner.validator
    receiver = dev_keypair("Eve") if case == "wrong_receiver" else miner.keypair
    return signed_headers(signer, receiver, "/NodeSynapse", b"{}", age_s=60 if case == "stale" else 0)


@pytest.mark.parametrize(
    "case, status, reason",
    [
        ("unsigned", 401, "malformed"),
        ("stale", 401, "stale"),
        ("wrong_receiver", 401, "wrong_receiver"),
        ("unregistered", 403, "unregistered"),
    ],
)
async def test_headers_alone_refuse_a_request_before_its_body_is_read(case: str, status: int, reason: str) -> None:
    """The body never finishes arriving, so only a refusal made from the headers can answer."""
    async with running_miner() as miner:
        host, port = miner.url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        head = "".join(f"{name}: {value}\r\n" for name, value in _headers(case, miner).items())
        writer.write(f"POST /NodeSynapse HTTP/1.1\r\nHost: m\r\n{head}Content-Length: 1000000\r\n\r\n{{".encode())
        try:
            async with asyncio.timeout(5.0):
                answer = await reader.readuntil(b"}")
        finally:
            writer.transport.abort()
    status_line, _, rest = answer.partition(b"\r\n")
    assert int(status_line.split()[1]) == status
    assert json.loads(rest[rest.index(b"{") :])["reason"] == reason
