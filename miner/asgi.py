"""What the miner's ASGI layers share: scope keys, a way to refuse, and the public bypass.

Layers pass what they learn inward through the ASGI scope, like Starlette's
``scope["user"]``: the body cap layer stores the raw body it read (so the
signature is checked over, and the handler parses, the very same bytes), the
auth layer the verified hotkey, the blacklist layer the caller's stake.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from starlette.middleware import Middleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from protocol.routes import PUBLIC_PATHS, error_body

__all__ = [
    "BODY",
    "HOTKEY",
    "STAKE",
    "ASGIApp",
    "Guarded",
    "Message",
    "Receive",
    "Scope",
    "Send",
    "caller_hotkey",
    "send_error",
]

BODY = "dagnet.body"
"""``bytes``: the whole request body, read once by the body cap layer."""
HOTKEY = "dagnet.hotkey"
"""``str``: the caller's hotkey, set only after its signature verified."""
STAKE = "dagnet.stake"
"""``float``: the caller's stake, set by the blacklist layer."""

_JSON_HEADERS = [(b"content-type", b"application/json")]


class Guarded:
    """``layers`` around ``app`` for every request except the public ones.

    Non-HTTP scopes and public paths reach ``app`` directly; everything else
    goes through the guard layers (auth, blacklist, rate limit, priority gate),
    which therefore never look at the path themselves.
    """

    def __init__(self, app: ASGIApp, *, layers: Sequence[Middleware]) -> None:
        guarded = app
        for cls, args, kwargs in reversed(layers):
            guarded = cls(guarded, *args, **kwargs)
        self.app = app
        self.guarded = guarded

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PUBLIC_PATHS:
            await self.app(scope, receive, send)
        else:
            await self.guarded(scope, receive, send)


def caller_hotkey(scope: Scope) -> str | None:
    """The verified caller's hotkey, or ``None`` when auth is off or the path is public."""
    return scope.get(HOTKEY)


async def send_error(
    send: Send,
    status: int,
    reason: str,
    message: str,
    headers: Iterable[tuple[bytes, bytes]] = (),
    **extra: Any,
) -> None:
    """Refuse straight from a layer, with the body :func:`protocol.routes.error_body` builds."""
    body = error_body(reason, message, **extra)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*_JSON_HEADERS, (b"content-length", str(len(body)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})
