"""Unauthenticated load against a miner, for ``dagnet bench network`` and the flood tests.

Each flood is what the miner must shed without help: connections that never finish
their request head, bodies that stall half-way (unsigned, or under forged signature
headers that only the body could disprove), and one enormous header. Every flood is
bounded in connections and in time, and is meant for loopback only.

:func:`legit_latencies` times what an honest validator sees meanwhile: signed
``NodeSynapse`` echo requests, each on a fresh connection (the worst case for a
server at its connection cap).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

CHUNK = 64 * 1024


@dataclass
class Flood:
    """The connections a flood holds open; :meth:`close` drops them all."""

    writers: list[asyncio.StreamWriter] = field(default_factory=list)
    readers: list[asyncio.StreamReader] = field(default_factory=list)
    refused: int = 0  # connections the server refused or reset while we opened them

    def close(self) -> None:
        for writer in self.writers:
            writer.transport.abort()

    async def closed_by_server(self, within_s: float) -> int:
        """How many of the held connections the server closes within ``within_s`` seconds."""

        async def closed(reader: asyncio.StreamReader) -> bool:
            try:
                async with asyncio.timeout(within_s):
                    while await reader.read(CHUNK):
                        pass
                return True
            except TimeoutError:
                return False
            except OSError:
                return True

        return sum(await asyncio.gather(*(closed(r) for r in self.readers)))


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 80


async def _open(url: str, first: bytes, flood: Flood) -> None:
    host, port = _address(url)
    try:
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(first)
        await writer.drain()
    except OSError:
        flood.refused += 1
        return
    flood.readers.append(reader)
    flood.writers.append(writer)


async def stalled_heads(url: str, count: int) -> Flood:
    """``count`` connections that send half a request head and then nothing."""
    flood = Flood()
    head = b"POST /NodeSynapse HTTP/1.1\r\nHost: miner\r\nX-Pad: "
    for _ in range(count):
        await _open(url, head, flood)
    return flood


def forged_headers(claimed_hotkey: str, receiver: str) -> bytes:
    """Signature headers that pass every check but the signature itself (which needs the body)."""
    from bittensor import http_auth

    return (
        f"X-Bittensor-Version: {http_auth.VERSION}\r\nX-Bittensor-Hotkey: {claimed_hotkey}\r\n"
        f"X-Bittensor-Nonce: {time.time_ns()}\r\nX-Bittensor-Receiver: {receiver}\r\n"
        f"X-Bittensor-Signature: 0x{'00' * 64}\r\n"
    ).encode()


async def stalled_bodies(url: str, count: int, *, declared: int, sent: int, headers: bytes = b"") -> Flood:
    """``count`` requests declaring a ``declared``-byte body, sending ``sent`` bytes of it, then stalling."""
    flood = Flood()
    head = (
        b"POST /NodeSynapse HTTP/1.1\r\nHost: miner\r\nContent-Type: application/json\r\n"
        + headers
        + f"Content-Length: {declared}\r\n\r\n".encode()
    )
    for _ in range(count):
        await _open(url, head + b" " * sent, flood)
    return flood


async def huge_header(url: str, total: int) -> int:
    """Send one header of ``total`` bytes; returns how many were written before the server cut it off."""
    host, port = _address(url)
    reader, writer = await asyncio.open_connection(host, port)
    written = 0
    chunk = b"a" * CHUNK
    try:
        writer.write(b"GET /health HTTP/1.1\r\nHost: miner\r\nX-Big: ")
        while written < total:
            writer.write(chunk)
            await writer.drain()
            written += len(chunk)
    except OSError:
        pass
    finally:
        writer.transport.abort()
    return written


async def legit_latencies(url: str, *, signer_uri: str, receiver: str, count: int) -> list[float]:
    """Seconds per signed echo ``NodeSynapse`` answered 200, each on a fresh connection, sorted.

    A request that fails or is refused counts as ``inf``: it is not a latency to hide.
    """
    import bittensor as bt
    import httpx
    from bittensor.sp_core import Keypair

    keypair = Keypair.create_from_uri(signer_uri)
    body = b'{"task_id":"flood","node_id":"n","subnet":"s","action":"echo","params":{"text":"ping"}}'
    latencies = []
    for _ in range(count):
        headers = bt.http_auth.sign(keypair, method="POST", path="/NodeSynapse", body=body, receiver_ss58=receiver)
        headers["Content-Type"] = "application/json"
        started = time.perf_counter()
        try:
            async with httpx.AsyncClient(timeout=10.0) as client:
                response = await client.post(url + "/NodeSynapse", content=body, headers=headers)
            ok = response.status_code == 200
        except httpx.HTTPError:
            ok = False
        latencies.append(time.perf_counter() - started if ok else float("inf"))
    return sorted(latencies)


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of already sorted values (0.0 when there are none)."""
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def memory_kib(pid: int) -> tuple[int, int]:
    """``(VmRSS, VmHWM)`` of process ``pid`` in KiB: its resident memory now and at its peak."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])
