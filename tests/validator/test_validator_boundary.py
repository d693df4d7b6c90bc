"""The validator's network boundary: nothing a peer sends costs more than that peer (docs/hardening.md).

Replies: a miner or a tool provider answering with a layered gzip bomb (gzip of
gzip of gzip of 1 GiB of zeros, 230 bytes on the wire) is refused on its headers;
the validator's peak memory, the call's time and the step's other miners show it.

The ``/health`` + ``/metrics`` server: a real validator process
(``tests/support/validator_process.py``, ``run_validator`` on a clock-driven chain)
with 1,024 descriptors, as a container gives it, takes 1,021 trickling connections and
one 64 MiB header while its steps query and score two real miners.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import signal
import socket
import struct
import subprocess
import sys
import time
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from typer.testing import CliRunner

from bench.flood import memory_kib
from miner.app import create_app
from miner.metagraph import StaticMetagraph
from miner.serving import EVERY_TOOL
from miner.settings import MinerSettings
from neurons.cli import app as dagnet
from neurons.localrun import family_task
from neurons.validator import HEALTH_LIMITS
from planners import load_planner
from protocol.metagraph import Peer
from protocol.runner import NodeCall
from protocol.synapse import NodeSynapse, TaskPackage
from subnets.registry import default_registry
from support.keys import MetagraphBuilder, dev_keypair
from support.peers import axon, raw_peer, reply_with, serve_asgi
from support.tasks import provider_profiles
from support.validator_process import SOURCE
from validator.client import ClientConfig, MinerClient
from validator.errors import PeerBadEncoding
from validator.remote import RemoteRunner, every_peer_serves
from validator.state import ValidatorState
from validator.validation import validation_step

pytestmark = pytest.mark.e2e


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


@contextlib.contextmanager
def _peak_growth() -> Iterator[dict[str, int]]:
    """This process's peak resident memory growth over the block, in KiB (``["kib"]``).

    The high-water mark is reset first (``/proc/self/clear_refs``), so earlier tests'
    peaks cannot hide a new one.
    """
    Path("/proc/self/clear_refs").write_text("5")
    before, _ = memory_kib(os.getpid())
    measured: dict[str, int] = {}
    yield measured
    measured["kib"] = memory_kib(os.getpid())[1] - before


def _synapse() -> NodeSynapse:
    return NodeSynapse(task_id="t1", node_id="n1", subnet="sn1", action="echo", params={"text": "hi"})


def _node_call(package: TaskPackage) -> NodeCall:
    subnet = sorted(package.available_tools)[0]
    return NodeCall(
        task_id=package.task_id,
        node_id="n1",
        subnet=subnet,
        action="echo",
        params={"text": "hi"},
        timeout_seconds=5.0,
        attempt=1,
    )


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
    async with (
        raw_peer(reply_with(200, bomb)) as plain,
        raw_peer(reply_with(200, b"{}", headers=("Content-Encoding: identity",))) as identity,
        MinerClient(VALIDATOR) as client,
    ):
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
    assert isinstance(reply.error, PeerBadEncoding) and str(reply.error) == f"unrequested content-encoding {ENCODING}"
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
    app = create_app(
        MinerSettings(port=0, serve=EVERY_TOOL, provider_subnets=task.available_tools),
        keypair=key,
        metagraph=StaticMetagraph(snapshot),
        registry=default_registry(),
        planner=load_planner(planner),
    )
    async with serve_asgi(app) as url:
        yield Peer(uid=snapshot.by_hotkey(key.ss58_address).uid, hotkey=key.ss58_address, url=url)


async def test_in_a_step_only_the_bomber_scores_zero(bomb: bytes) -> None:
    task = family_task(TASK_ID, HIDDEN)
    snapshot = (
        MetagraphBuilder(netuid=7).validator(VALIDATOR, stake=1_000.0).miner(PROVIDER).miner(GOOD).miner(BOMBER).build()
    )
    async with contextlib.AsyncExitStack() as stack:
        provider = await stack.enter_async_context(_miner(PROVIDER, "good", snapshot, task))
        good = await stack.enter_async_context(_miner(GOOD, "good", snapshot, task))
        peer = await stack.enter_async_context(_bomber(bomb))
        bomber = Peer(uid=snapshot.by_hotkey(BOMBER.ss58_address).uid, hotkey=BOMBER.ss58_address, url=peer.url)
        client = await stack.enter_async_context(MinerClient(VALIDATOR, config=ClientConfig(timeout_s=5.0)))
        with _peak_growth() as growth:
            result = await validation_step(
                task=task,
                miners=[good, bomber],
                client=client,
                runner_factory=lambda package, miner: RemoteRunner(client, every_peer_serves([provider]), package),
            )
    honest, bombed = result.outcomes
    print(f"\nstep with a bomber: peak growth {growth['kib']} KiB, query phase {1e3 * result.timings.query_s:.0f} ms")
    assert bombed.score.S == 0 and bombed.execution is None
    assert bombed.reason == f"query failed: unrequested content-encoding {ENCODING}"
    assert honest.reason is None and honest.execution is not None and honest.execution.status == "completed"
    assert honest.score.S > 0
    assert growth["kib"] < PEAK_GROWTH_BOUND_KIB


# -- the /health + /metrics server ------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
VALIDATOR_PROCESS = ROOT / "tests" / "support" / "validator_process.py"
OPEN_FILES = 1024
FLOOD_CONNECTIONS = 1021
"""The flood of the report: with 1,024 descriptors, it left the validator none for its miners."""
TRICKLE_EVERY_S = 0.5
HUGE_HEADER_BYTES = 64 * MIB
HEADER_GROWTH_BOUND_KIB = 8 * 1024
"""The validator's peak memory growth while the 64 MiB header arrives, a step running
meanwhile (every family has run once before); unguarded, the header took +131 MiB."""
FLOOD_STEPS = 2
"""Steps that must settle, every miner answered and scored, while the flood is held."""
SECOND = dev_keypair("dagnet-boundary-naive")
"""A second miner, planning with ``good`` too: naive refuses outline and goal packages,
and this test wants every miner answered at every hint tier."""


def _limited_files() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, hard))


@contextlib.asynccontextmanager
async def _validator(tmp_path: Path) -> AsyncIterator[tuple[subprocess.Popen, str, Path]]:
    """Two miners (both good) and a provider in this loop; the validator process
    querying them, with 1,024 descriptors. Yields the process, its /health URL, its state file."""
    snapshot = MetagraphBuilder(netuid=7).validator(VALIDATOR, stake=1_000.0).miner(GOOD).miner(SECOND).build()
    state, log = tmp_path / "validator.sqlite", tmp_path / "validator.log"
    async with contextlib.AsyncExitStack() as stack:
        axons = {}
        for key, planner in ((GOOD, "good"), (SECOND, "good")):
            app = create_app(
                MinerSettings(port=0),
                keypair=key,
                metagraph=StaticMetagraph(snapshot),
                registry=default_registry(),
                planner=load_planner(planner),
            )
            served = axon(await stack.enter_async_context(serve_asgi(app)))
            axons[key.ss58_address] = [served.host, served.port]
        provider_app = create_app(
            MinerSettings(port=0, serve=EVERY_TOOL, provider_tasks=provider_profiles(SOURCE.tasks())),
            keypair=PROVIDER,
            metagraph=StaticMetagraph(snapshot),
            registry=default_registry(),
            planner=load_planner("good"),
        )
        provider_url = await stack.enter_async_context(serve_asgi(provider_app))
        spec = tmp_path / "spec.json"
        spec.write_text(
            json.dumps(
                {
                    "state": str(state),
                    "hotkey": VALIDATOR.ss58_address,
                    "start": time.time(),
                    "block_time": 0.5,
                    "provider": {"uid": 99, "hotkey": PROVIDER.ss58_address, "url": provider_url},
                    "neurons": [
                        {
                            "uid": n.uid,
                            "hotkey": n.hotkey,
                            "stake": n.stake,
                            "permit": n.validator_permit,
                            "axon": axons.get(n.hotkey),
                        }
                        for n in snapshot.neurons
                    ],
                }
            )
        )
        process = subprocess.Popen(
            [sys.executable, str(VALIDATOR_PROCESS), str(spec)],
            cwd=ROOT,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            preexec_fn=_limited_files,
        )
        try:
            url = await _health_url(process, log)
            yield process, url, state
        finally:
            process.send_signal(signal.SIGTERM)
            await asyncio.to_thread(process.wait, 30)


async def _health_url(process: subprocess.Popen, log: Path) -> str:
    async with asyncio.timeout(60):
        while True:
            assert process.poll() is None, log.read_text()[-3000:]
            for line in log.read_text().splitlines():
                if "listening on" in line:
                    return line.split("listening on ", 1)[1].split()[0]
            await asyncio.sleep(0.05)


def _steps(state_path: Path) -> dict[int, list]:
    """The settled steps' records by block."""
    state = ValidatorState(state_path)
    try:
        steps: dict[int, list] = {}
        for record in state.executions():
            steps.setdefault(record.block, []).append(record)
        return steps
    finally:
        state.close()


async def _until_steps(
    state_path: Path, process: subprocess.Popen, within_s: float, enough: Callable[[dict[int, list]], bool]
) -> dict[int, list]:
    """The settled steps once they are ``enough``, or all there are after ``within_s``."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(within_s):
            while not enough(_steps(state_path)):
                assert process.poll() is None, "the validator exited"
                await asyncio.sleep(0.05)
    return _steps(state_path)


def _at_least(count: int) -> Callable[[dict[int, list]], bool]:
    return lambda steps: len(steps) >= count


def _every_family(steps: dict[int, list]) -> bool:
    """Each family has run once: what a family loads on its first step is not counted as the header's."""
    return {r.base_task_id for records in steps.values() for r in records} >= set(SOURCE.task_ids)


class _Trickle:
    """``count`` connections to ``url`` each sending a request head one byte every
    ``TRICKLE_EVERY_S``, never finishing it; counts what the server refused or closed."""

    def __init__(self) -> None:
        self.writers: list[asyncio.StreamWriter] = []
        self.refused = 0
        self.closed = 0
        self._closing = asyncio.Event()
        self._tasks: list[asyncio.Task] = []

    async def open(self, url: str, count: int) -> None:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        for _ in range(count):
            try:
                reader, writer = await asyncio.open_connection(host, int(port))
                writer.write(b"GET /health HTTP/1.1\r\nHost: validator\r\nX-Pad: ")
            except OSError:
                self.refused += 1
                continue
            self.writers.append(writer)
            self._tasks.append(asyncio.create_task(self._until_closed(reader)))
        self._tasks.append(asyncio.create_task(self._drip()))

    async def _until_closed(self, reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(OSError):
            while await reader.read(4096):
                pass
        self.closed += 1
        self._closing.set()

    async def shed(self, count: int, within_s: float) -> None:
        """Until the server has closed ``count`` of the connections, or ``within_s`` has passed."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within_s):
                while self.closed < count:
                    self._closing.clear()
                    await self._closing.wait()

    async def _drip(self) -> None:
        while True:
            await asyncio.sleep(TRICKLE_EVERY_S)
            for writer in self.writers:
                if not writer.transport.is_closing():
                    writer.write(b"a")

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for writer in self.writers:
            writer.transport.abort()


async def _huge_header(url: str, total: int) -> tuple[bytes, int]:
    """Send one ``total``-byte header to ``/health`` while reading; returns the status line
    the server answered (``b""`` if none) and how many header bytes went out."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    answer = asyncio.create_task(reader.readline())
    written, chunk = 0, b"a" * 65536
    try:
        async with asyncio.timeout(10):
            writer.write(b"GET /health HTTP/1.1\r\nHost: validator\r\nX-Big: ")
            while written < total and not answer.done():
                writer.write(chunk)
                await writer.drain()
                written += len(chunk)
    except (OSError, TimeoutError):
        pass
    try:
        async with asyncio.timeout(5):
            status = await answer
    except (OSError, TimeoutError):
        status = b""
    writer.transport.abort()
    return status, written


async def _health_status(url: str) -> int | str:
    try:
        async with httpx.AsyncClient() as client:
            return (await client.get(url + "/health", timeout=5)).status_code
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"


async def test_health_floods_leave_miner_queries_answered_and_scored(tmp_path: Path) -> None:
    """The flood opens before the first step, so every connection to a miner is made under it."""
    async with _validator(tmp_path) as (process, url, state):
        flood = _Trickle()
        started = time.perf_counter()
        try:
            await flood.open(url, FLOOD_CONNECTIONS)
            steps = await _until_steps(state, process, 30, _at_least(FLOOD_STEPS))
            held_s = time.perf_counter() - started
            await flood.shed(FLOOD_CONNECTIONS - HEALTH_LIMITS.max_connections, 5)  # else the header is evicted
            closed = flood.closed
            warm = await _until_steps(state, process, 20, _every_family)
            quiet_rss, _ = memory_kib(process.pid)
            Path(f"/proc/{process.pid}/clear_refs").write_text("5")
            (status, written), _ = await asyncio.gather(
                _huge_header(url, HUGE_HEADER_BYTES), _until_steps(state, process, 10, _at_least(len(warm) + 1))
            )
            _, peak = memory_kib(process.pid)
            health = await _health_status(url)
        finally:
            flood.close()
    during = [records for _, records in sorted(steps.items())]
    figures = {
        "steps_s": round(held_s, 2),
        "connections": len(flood.writers),
        "refused": flood.refused,
        "closed_by_server": closed,
        "header_status": status.decode().strip(),
        "header_sent_kib": written // 1024,
        "header_peak_rss_growth_kib": peak - quiet_rss,
        "health_after": health,
        "scores_during": [[round(r.score["S"], 3) for r in records] for records in during],
    }
    print("\nhealth flood: " + json.dumps(figures))
    assert len(during) >= FLOOD_STEPS, figures
    for records in during:  # answered (no failure reason), and scored: each plan ran in the tempo's world
        assert sorted(r.uid for r in records) == [1, 2], figures
        assert all(r.reason is None for r in records), [r.reason for r in records]
        assert all(r.metrics is not None and r.world_tempo is not None for r in records), figures
        # Not S > 0: the hidden world fails some nodes of good's plans whatever the flood does
        # (good declares one spare retry; a subnet failing a third of its attempts fails a node
        # of dt_inventory or rag_comets on 13-26 % of instances), and a failed node is the
        # world's verdict, not a lost query: the record then says which node failed.
        for record in records:
            assert record.score["S"] > 0 or record.metrics["hard_failures"] > 0, figures
    assert status.startswith(b"HTTP/1.1 431"), figures
    assert written < 8 * MIB, figures
    assert peak - quiet_rss < HEADER_GROWTH_BOUND_KIB, figures
    assert health == 200, figures  # an honest scraper still gets in


def test_a_port_in_use_is_one_line_exit_2_and_no_state_file(tmp_path: Path) -> None:
    state = tmp_path / "validator.sqlite"
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = CliRunner().invoke(
            dagnet,
            [
                "validator",
                "--dev-key",
                "//Alice",
                "--port",
                str(port),
                "--state",
                str(state),
                "--network",
                f"embedded:{tmp_path / 'chain.sqlite'}",
            ],
        )
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines()[-1] == f"error: port {port} is in use (--port)"
    assert list(tmp_path.iterdir()) == []  # neither the state file nor the chain was created
