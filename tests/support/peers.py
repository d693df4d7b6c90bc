"""Peers on loopback ports for tests: real uvicorn servers and misbehaving raw ones.

Both kinds listen on a socket bound before the server starts, so a client may
connect at once (the kernel queues the connection) and no test waits on a flag.

    async with serve_asgi(app) as url: ...
    async with raw_peer(HANG) as peer: ...   # peer.url, peer.connections
    axon(url)                                # the url as a metagraph axon
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import uvicorn

from protocol.metagraph import Axon, MetagraphSnapshot, Neuron


def _listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(512)
    sock.setblocking(False)
    return sock


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{host}:{port}"


def axon(url: str) -> Axon:
    """Where the metagraph says a peer served at ``url`` (``http://host:port``) listens."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return Axon(host, int(port))


def serving(snapshot: MetagraphSnapshot, urls: dict[str, str]) -> MetagraphSnapshot:
    """``snapshot`` with each hotkey in ``urls`` served at its url, every other neuron without an axon."""
    neurons = tuple(
        Neuron(n.uid, n.hotkey, n.stake, n.validator_permit, axon(urls[n.hotkey]) if n.hotkey in urls else None)
        for n in snapshot.neurons
    )
    return MetagraphSnapshot(snapshot.netuid, snapshot.block, neurons)


@contextlib.asynccontextmanager
async def serve_asgi(app: object) -> AsyncIterator[str]:
    """Serve ``app`` with uvicorn in the running loop; yields its base URL."""
    sock = _listening_socket()
    config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield _url(sock)
    finally:
        server.should_exit = True
        await task
        sock.close()


Behaviour = Callable[[asyncio.StreamReader, asyncio.StreamWriter, asyncio.Event], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    """Headers and body of one HTTP/1.1 request (Content-Length bodies only)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    return head + (await reader.readexactly(length) if length else b"")


def _response(status: int, body: bytes, *, content_length: bool = True, extra: tuple[str, ...] = ()) -> bytes:
    headers = [f"HTTP/1.1 {status} X", "Content-Type: application/json", "Connection: close", *extra]
    headers.append(f"Content-Length: {len(body)}" if content_length else "Transfer-Encoding: chunked")
    head = ("\r\n".join(headers) + "\r\n\r\n").encode()
    if content_length:
        return head + body
    return head + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"


async def HANG(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stop: asyncio.Event) -> None:
    """Read the request, then never answer (until the test ends)."""
    await _read_request(reader)
    await stop.wait()


async def CLOSE(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stop: asyncio.Event) -> None:
    """Read the request, then close the connection without a response."""
    await _read_request(reader)


async def GARBAGE(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stop: asyncio.Event) -> None:
    """Answer 200 with bytes that are not JSON."""
    await _read_request(reader)
    writer.write(_response(200, b"\x00\xffnot json at all{{{"))
    await writer.drain()


def reply_with(status: int, body: bytes, *, content_length: bool = True, headers: tuple[str, ...] = ()) -> Behaviour:
    """Answer every request with ``status``, ``body`` (chunked when not ``content_length``)
    and any extra ``headers`` lines (``"Name: value"``)."""

    async def behave(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stop: asyncio.Event) -> None:
        await _read_request(reader)
        writer.write(_response(status, body, content_length=content_length, extra=headers))
        await writer.drain()

    return behave


def slow(delay_s: float, body: bytes = b"{}") -> Behaviour:
    """Answer 200 with ``body`` after ``delay_s`` (a peer that is supposed to take time)."""

    async def behave(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stop: asyncio.Event) -> None:
        await _read_request(reader)
        await asyncio.sleep(delay_s)
        writer.write(_response(200, body))
        await writer.drain()

    return behave


def endless(chunk: bytes = b"x" * 65536) -> Behaviour:
    """Answer 200 and stream ``chunk`` forever (no length): counts bytes it managed to send."""

    async def behave(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stop: asyncio.Event) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
        while not stop.is_set():
            writer.write(chunk)
            await writer.drain()

    return behave


@dataclass
class RawPeer:
    url: str
    connections: int = 0
    active: int = 0
    max_active: int = 0
    _handlers: set[asyncio.Task] = field(default_factory=set, repr=False)


@contextlib.asynccontextmanager
async def raw_peer(behaviour: Behaviour) -> AsyncIterator[RawPeer]:
    """A TCP server on a loopback port that treats every connection with ``behaviour``."""
    stop = asyncio.Event()
    sock = _listening_socket()
    peer = RawPeer(url=_url(sock))

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer.connections += 1
        peer._handlers.add(asyncio.current_task())
        peer.active += 1
        peer.max_active = max(peer.max_active, peer.active)
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            await behaviour(reader, writer, stop)
        peer.active -= 1
        writer.close()

    server = await asyncio.start_server(handle, sock=sock)
    try:
        yield peer
    finally:
        stop.set()
        server.close()
        await asyncio.gather(*peer._handlers, return_exceptions=True)
        await server.wait_closed()
