"""What the miner's ASGI layers share: scope keys and a way to answer on their own.

Layers pass what they learn inward through the ASGI scope, like Starlette's
``scope["user"]``: the body cap layer stores the raw body it read (so the
signature is checked over, and the handler parses, the very same bytes), the
auth layer the verified hotkey, the blacklist layer the caller's stake.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from protocol.routes import PUBLIC_PATHS

__all__ = [
    "BODY",
    "HOTKEY",
    "STAKE",
    "ASGIApp",
    "Message",
    "Receive",
    "Scope",
    "Send",
    "caller_hotkey",
    "is_public",
    "send_json",
]

BODY = "dagnet.body"
"""``bytes``: the whole request body, read once by the body cap layer."""
HOTKEY = "dagnet.hotkey"
"""``str``: the caller's hotkey, set only after its signature verified."""
STAKE = "dagnet.stake"
"""``float``: the caller's stake, set by the blacklist layer."""

_JSON_HEADERS = [(b"content-type", b"application/json")]


def is_public(scope: Scope) -> bool:
    """True for non-HTTP scopes and public paths: layers pass these straight through."""
    return scope["type"] != "http" or scope["path"] in PUBLIC_PATHS


def caller_hotkey(scope: Scope) -> str | None:
    """The verified caller's hotkey, or ``None`` when auth is off or the path is public."""
    return scope.get(HOTKEY)


async def send_json(
    send: Send,
    status: int,
    payload: dict[str, Any],
    headers: Iterable[tuple[bytes, bytes]] = (),
) -> None:
    """Send a complete JSON response straight from a layer."""
    body = json.dumps(payload, separators=(",", ":")).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*_JSON_HEADERS, (b"content-length", str(len(body)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})
