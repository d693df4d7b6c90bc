"""Layers that bound what one request, and one caller, can cost the miner.

:class:`BodyCapMiddleware` reads the body once, never holding more than the
cap, and hands it inward; :class:`RateLimitMiddleware` gives each verified
hotkey a token bucket.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable
from typing import Any

from .asgi import BODY, ASGIApp, Message, Receive, Scope, Send, caller_hotkey, send_error

MAX_BUFFERED_BYTES = 32 * 1024 * 1024
"""Default ceiling on the request bodies being read at once, all connections together."""

_BUSY = "too many request bodies in flight; retry shortly"


class _Read:
    """One body being read: the task reading it and the bytes of the budget it holds."""

    __slots__ = ("task", "held", "evicted")

    def __init__(self, task: asyncio.Task[Any] | None) -> None:
        self.task = task
        self.held = 0
        self.evicted = False


class BodyCapMiddleware:
    """413 for a body over ``max_bytes``; otherwise the body is in ``scope[BODY]``.

    A declared ``Content-Length`` over the cap is refused before anything is
    read; a chunked (or lying) body is counted while it arrives and refused the
    moment it passes the cap. Inner layers and the handler receive the same
    bytes again through ``receive``, so nothing downstream reads the socket.

    All bodies being read at once hold at most ``max_buffered_bytes`` together.
    A chunk that would pass that budget evicts the bodies that have been arriving
    longest (503 with ``Retry-After: 1``), so senders that trickle or stall cannot
    pile up memory, nor keep out a caller that sends its body at once.
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int, max_buffered_bytes: int = MAX_BUFFERED_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_buffered_bytes = max_buffered_bytes
        self.buffered = 0
        self._reads: dict[_Read, None] = {}  # bodies being read, oldest first

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(send, declared)
            return
        read = _Read(asyncio.current_task())
        self._reads[read] = None
        try:
            body = await self._read(receive, send, read)
        except asyncio.CancelledError:
            if not read.evicted:
                raise
            read.task.uncancel()  # type: ignore[union-attr]
            body = None
            await send_error(send, 503, "busy", _BUSY, [(b"retry-after", b"1"), (b"connection", b"close")])
        finally:
            self._release(read)
        if body is None:
            return
        scope[BODY] = body
        finished = [False]
        await _until_disconnect(self.app(scope, _replay_once(body), _tracked(send, finished)), receive, finished)

    async def _read(self, receive: Receive, send: Send, read: _Read) -> bytes | None:
        """The whole body, or ``None`` once a refusal was sent (or the client left)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None  # the client left; there is no one to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(send, size)
                return None
            self._hold(read, len(chunk))
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _hold(self, read: _Read, size: int) -> None:
        """Count ``size`` more bytes against the budget, evicting the oldest other reads to fit."""
        for victim in list(self._reads):
            if self.buffered + size <= self.max_buffered_bytes:
                break
            if victim is not read and victim.task is not None:
                victim.evicted = True
                victim.task.cancel()
                self._release(victim)
        self.buffered += size
        read.held += size

    def _release(self, read: _Read) -> None:
        self.buffered -= read.held
        read.held = 0
        self._reads.pop(read, None)

    async def _refuse(self, send: Send, size: int) -> None:
        await send_error(
            send,
            413,
            "body_too_large",
            f"request body of {size}+ bytes exceeds the limit of {self.max_bytes} bytes",
            [(b"connection", b"close")],
        )


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # unparseable: count while reading instead
    return None


def _replay_once(body: bytes) -> Receive:
    """A ``receive`` that yields ``body`` once, then waits until the request is over
    (:func:`_until_disconnect` owns the real one)."""
    pending: Message | None = {"type": "http.request", "body": body, "more_body": False}

    async def replayed() -> Message:
        nonlocal pending
        if pending is not None:
            message, pending = pending, None
            return message
        await asyncio.Future()  # cancelled with the request
        raise AssertionError("unreachable")

    return replayed


def _tracked(send: Send, finished: list[bool]) -> Send:
    """``send``, noting in ``finished[0]`` when the last body chunk went out."""

    async def tracked(message: Message) -> None:
        await send(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            finished[0] = True

    return tracked


async def _until_disconnect(work: Awaitable[None], receive: Receive, finished: list[bool]) -> None:
    """Run ``work``; if the client goes away before the response is sent, cancel it.

    So an abandoned request stops its tool and frees its concurrency slot at once,
    instead of running to its own timeout for no one.
    """
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_disconnected(receive))
    try:
        await asyncio.wait((task, watch), return_when=asyncio.FIRST_COMPLETED)
        if not task.done() and not finished[0]:
            task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            if not watch.done():
                raise  # we were cancelled ourselves, not by the client leaving
    finally:
        watch.cancel()
        task.cancel()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class TokenBuckets:
    """One token bucket per key: ``burst`` capacity, refilled at ``per_second``.

    Only callers that passed the blacklist reach it, so the table is bounded by
    the metagraph's size.
    """

    __slots__ = ("_per_second", "_burst", "_buckets")

    def __init__(self, per_second: float, burst: int) -> None:
        self._per_second = per_second
        self._burst = float(burst)
        self._buckets: dict[str, list[float]] = {}  # key -> [tokens, last refill time]

    def take(self, key: str, now: float) -> float:
        """Take one token: 0.0 when granted, else the seconds until one is due."""
        bucket = self._buckets.get(key)
        if bucket is None:
            self._buckets[key] = [self._burst - 1.0, now]
            return 0.0
        tokens = min(self._burst, bucket[0] + (now - bucket[1]) * self._per_second)
        bucket[1] = now
        if tokens >= 1.0:
            bucket[0] = tokens - 1.0
            return 0.0
        bucket[0] = tokens
        return (1.0 - tokens) / self._per_second


class RateLimitMiddleware:
    """429 with ``Retry-After`` when a hotkey outruns its token bucket."""

    def __init__(self, app: ASGIApp, *, per_second: float, burst: int) -> None:
        self.app = app
        self.buckets = TokenBuckets(per_second, burst)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        hotkey = caller_hotkey(scope)
        if hotkey is not None:
            wait_s = self.buckets.take(hotkey, time.monotonic())
            if wait_s > 0.0:
                retry_after = max(1, math.ceil(wait_s))
                await send_error(
                    send,
                    429,
                    "rate_limited",
                    "rate limit exceeded for this hotkey",
                    [(b"retry-after", str(retry_after).encode())],
                    retry_after_s=round(wait_s, 3),
                )
                return
        await self.app(scope, receive, send)
