"""The validator's network boundary: nothing a peer sends costs more than that peer (docs/hardening.md).

Replies: a miner or a tool provider answering with a layered gzip bomb (gzip of
gzip of gzip of 1 GiB of zeros, 230 bytes on the wire) is refused on its headers;
the validator's peak memory, the call's time and the step's other miners show it.
"""

from __future__ import annotations

import contextlib
import json
import struct
import time
import zlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from support.keys import MetagraphBuilder, dev_keypair
from support.peers import raw_peer, reply_with, serve_asgi

from miner.app import create_app
from miner.config import MinerSettings
from miner.metagraph import StaticMetagraph
from miner.planner import get_planner
from miner.tools.registry import default_registry
from neurons.localrun import family_task
from protocol.metagraph import Peer
from protocol.runner import NodeCall
from protocol.synapse import NodeSynapse, TaskPackage
from validator.client import ClientConfig, MinerClient
from validator.remote import RemoteRunner, every_peer_serves
from validator.step import validation_step

MIB = 1 << 20
BOMB_MIB = 1024
"""What the bomb inflates to. Nothing may decode it, so its size only makes the old failure loud."""
PEAK_GROWTH_BOUND_KIB = 64 * 1024
CALL_BOUND_S = 1.0
ENCODING = "gzip, gzip, gzip"
TASK_ID, HIDDEN = "rag_comets", 2718

VALIDATOR = dev_keypair("Alice")
GOOD = dev_keypair("dagnet-boundary-good")
PROVIDER = dev_keypair("dagnet-boundary-provider")
BOMBER = dev_keypair("dagnet-boundary-bomber")


def _gzip_of_zeros(mib: int) -> bytes:
    """A gzip member of ``mib`` MiB of zeros, built from one compressed MiB repeated.

    After a full flush deflate forgets its history, so the flushed block for one MiB
    of zeros is the same every time and may be repeated; only the CRC walks the zeros.
    """
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = deflate.compress(bytes(MIB)) + deflate.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(mib):
        crc = zlib.crc32(bytes(MIB), crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    return header + block * mib + deflate.flush() + struct.pack("<II", crc, (mib * MIB) & 0xFFFFFFFF)


@pytest.fixture(scope="module")
def bomb() -> bytes:
    """gzip(gzip(gzip(zeros))): a few hundred bytes that inflate to ``BOMB_MIB`` MiB."""
    layered = _gzip_of_zeros(BOMB_MIB)
    for _ in range(2):
        layered = zlib.compress(layered, 9, wbits=31)
    assert len(layered) < 4096
    return layered


def _bomber(bomb: bytes):
    return raw_peer(reply_with(200, bomb, headers=(f"Content-Encoding: {ENCODING}",)))


def _memory_kib() -> tuple[int, int]:
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


@contextlib.contextmanager
def _peak_growth() -> Iterator[dict[str, int]]:
    """This process's peak resident memory growth over the block, in KiB (``["kib"]``).

    The high-water mark is reset first (``/proc/self/clear_refs``), so earlier tests'
    peaks cannot hide a new one.
    """
    Path("/proc/self/clear_refs").write_text("5")
    before, _ = _memory_kib()
    measured: dict[str, int] = {}
    yield measured
    measured["kib"] = _memory_kib()[1] - before


def _synapse() -> NodeSynapse:
    return NodeSynapse(task_id="t1", node_id="n1", subnet="sn1", action="echo", params={"text": "hi"})


def _node_call(package: TaskPackage) -> NodeCall:
    subnet = sorted(package.available_tools)[0]
    return NodeCall(task_id=package.task_id, node_id="n1", subnet=subnet, action="echo", params={"text": "hi"},
                    timeout_seconds=5.0, attempt=1)


async def test_the_client_asks_for_identity_only() -> None:
    async def echo_headers(request: Request) -> JSONResponse:
        return JSONResponse(dict(request.headers))

    app = Starlette(routes=[Route("/NodeSynapse", echo_headers, methods=["POST"])])
    async with serve_asgi(app) as url, MinerClient(VALIDATOR) as client:
        reply = await client.call_node(url, PROVIDER.ss58_address, _synapse())
    assert reply.ok, reply.error
    assert json.loads(reply.body)["accept-encoding"] == "identity"


async def test_a_compressed_reply_from_a_plain_reply_is_told_apart_by_its_header_only(bomb: bytes) -> None:
    """Content that merely looks compressed is data (the caller judges it); a declared coding is refused."""
    async with raw_peer(reply_with(200, bomb)) as plain, raw_peer(reply_with(200, b"{}", headers=("Content-Encoding: identity",))) as identity, \
            MinerClient(VALIDATOR) as client:
        undeclared = await client.call_node(plain.url, PROVIDER.ss58_address, _synapse())
        declared_identity = await client.call_node(identity.url, PROVIDER.ss58_address, _synapse())
    assert undeclared.ok and undeclared.body == bomb
    assert declared_identity.ok and declared_identity.body == b"{}"


async def test_a_miner_s_gzip_bomb_costs_a_few_kib_and_under_a_second(bomb: bytes) -> None:
    package = family_task(TASK_ID, HIDDEN).package()
    async with _bomber(bomb) as peer, MinerClient(VALIDATOR) as client:
        with _peak_growth() as growth:
            started = time.perf_counter()
            reply = await client.query_workflow(peer.url, BOMBER.ss58_address, package)
            elapsed = time.perf_counter() - started
    print(f"\nminer bomb: {len(bomb)} bytes, peak growth {growth['kib']} KiB, {1e3 * elapsed:.1f} ms")
    assert reply.error == f"unrequested content-encoding {ENCODING}"
    assert not reply.retryable and peer.connections == 1
    assert elapsed < CALL_BOUND_S
    assert growth["kib"] < PEAK_GROWTH_BOUND_KIB


async def test_a_provider_s_gzip_bomb_fails_its_node_only(bomb: bytes) -> None:
    package = family_task(TASK_ID, HIDDEN).package()
    async with _bomber(bomb) as peer, MinerClient(VALIDATOR) as client:
        provider = Peer(uid=9, hotkey=PROVIDER.ss58_address, url=peer.url)
        runner = RemoteRunner(client, every_peer_serves([provider]), package)
        with _peak_growth() as growth:
            started = time.perf_counter()
            result = await runner.run(_node_call(package))
            elapsed = time.perf_counter() - started
    print(f"\nprovider bomb: peak growth {growth['kib']} KiB, {1e3 * elapsed:.1f} ms")
    assert result.output is None and result.error == f"unrequested content-encoding {ENCODING}"
    assert result.unplanned_retries == 0 and peer.connections == 1  # refused, not retried
    assert elapsed < CALL_BOUND_S
    assert growth["kib"] < PEAK_GROWTH_BOUND_KIB


@contextlib.asynccontextmanager
async def _miner(key, planner: str, snapshot, task) -> AsyncIterator[Peer]:
    app = create_app(MinerSettings(port=0, provider_subnets=task.available_tools), keypair=key,
                     metagraph=StaticMetagraph(snapshot), registry=default_registry(), planner=get_planner(planner))
    async with serve_asgi(app) as url:
        yield Peer(uid=snapshot.by_hotkey(key.ss58_address).uid, hotkey=key.ss58_address, url=url)


async def test_in_a_step_only_the_bomber_scores_zero(bomb: bytes) -> None:
    task = family_task(TASK_ID, HIDDEN)
    snapshot = MetagraphBuilder(netuid=7).validator(VALIDATOR, stake=1_000.0).miner(PROVIDER).miner(GOOD) \
        .miner(BOMBER).build()
    async with contextlib.AsyncExitStack() as stack:
        provider = await stack.enter_async_context(_miner(PROVIDER, "good", snapshot, task))
        good = await stack.enter_async_context(_miner(GOOD, "good", snapshot, task))
        peer = await stack.enter_async_context(_bomber(bomb))
        bomber = Peer(uid=snapshot.by_hotkey(BOMBER.ss58_address).uid, hotkey=BOMBER.ss58_address, url=peer.url)
        client = await stack.enter_async_context(MinerClient(VALIDATOR, config=ClientConfig(timeout_s=5.0)))
        with _peak_growth() as growth:
            result = await validation_step(
                task=task, miners=[good, bomber], client=client,
                runner_factory=lambda package, miner: RemoteRunner(client, every_peer_serves([provider]), package),
            )
    honest, bombed = result.outcomes
    print(f"\nstep with a bomber: peak growth {growth['kib']} KiB, query phase {1e3 * result.timings.query_s:.0f} ms")
    assert bombed.score.S == 0 and bombed.execution is None
    assert bombed.reason == f"query failed: unrequested content-encoding {ENCODING}"
    assert honest.reason is None and honest.execution is not None and honest.execution.status == "completed"
    assert honest.score.S > 0
    assert growth["kib"] < PEAK_GROWTH_BOUND_KIB
