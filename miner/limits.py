"""Layers that bound what one request, and one caller, can cost the miner.

:class:`BodyCapMiddleware` reads the body once, never holding more than the
cap, and hands it inward; :class:`RateLimitMiddleware` gives each verified
hotkey a token bucket.
"""

from __future__ import annotations

import math
import time

from .asgi import BODY, ASGIApp, Message, Receive, Scope, Send, caller_hotkey, send_error


class BodyCapMiddleware:
    """413 for a body over ``max_bytes``; otherwise the body is in ``scope[BODY]``.

    A declared ``Content-Length`` over the cap is refused before anything is
    read; a chunked (or lying) body is counted while it arrives and refused the
    moment it passes the cap. Inner layers and the handler receive the same
    bytes again through ``receive``, so nothing downstream reads the socket.
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(send, declared)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left; there is no one to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(send, size)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        scope[BODY] = body
        await self.app(scope, _replay(body, receive), send)

    async def _refuse(self, send: Send, size: int) -> None:
        await send_error(
            send, 413, "body_too_large",
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


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that yields ``body`` once, then defers to the real one
    (which reports the disconnect when the client goes)."""
    pending: Message | None = {"type": "http.request", "body": body, "more_body": False}

    async def replayed() -> Message:
        nonlocal pending
        if pending is not None:
            message, pending = pending, None
            return message
        return await receive()

    return replayed


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
                    send, 429, "rate_limited", "rate limit exceeded for this hotkey",
                    [(b"retry-after", str(retry_after).encode())], retry_after_s=round(wait_s, 3),
                )
                return
        await self.app(scope, receive, send)
