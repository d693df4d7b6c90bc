"""The connection guard of dagnet's servers: limits enforced on each connection, below the ASGI app.

The miner serves through it, and so does the validator's ``/health`` + ``/metrics``
server (``neurons.validator``), with its own :class:`ServerLimits`.

uvicorn's httptools protocol, with what a server facing anyone on the internet
needs and uvicorn does not give it:

- *head size*: a request line plus headers over ``max_head_bytes`` gets 431 and
  the connection closes, before the parser has buffered more than one read past it.
  The close is gentle: the 431 is followed by a half-close, reading stops, and the
  connection is reset :data:`LINGER_S` later, so the client can read the answer
  (closing at once with its bytes unread would reset the connection, 431 and all);
- *head timeout*: a connection must finish a request head within ``head_timeout_s``
  of opening (or of its previous response);
- *body timeout*: once the head is in, the whole body must arrive within
  ``body_timeout_s``;
- *idle keep-alive*: an idle connection closes after ``keep_alive_s`` (uvicorn's own);
- *connection cap*: at most ``max_connections`` are open, below the process's
  open-file limit so ``accept`` never fails for lack of descriptors. A connection
  arriving over the cap evicts the one that has waited longest without a request
  being served (a head or body still arriving, or idle); only when every
  connection is being served is the newcomer closed instead.

A caller that is slow or silent therefore costs at most one slot for a bounded
time, and a flood of them displaces itself before it displaces a caller that
sends a whole request at once.
"""

from __future__ import annotations

import asyncio
import resource
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .settings import ServerLimits

LINGER_S = 1.0
"""How long a refused connection stays half-closed, reading paused, before it is reset."""

FD_RESERVE = 128
"""Descriptors kept free for everything but client connections (logs, SQLite, sandboxes)."""


def connection_cap(limits: ServerLimits) -> int:
    """``limits.max_connections``, never above the soft open-file limit minus :data:`FD_RESERVE`."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = max(1, soft - FD_RESERVE) if soft != resource.RLIM_INFINITY else 65_536
    return ceiling if limits.max_connections is None else min(limits.max_connections, ceiling)


_HEAD, _BODY, _SERVING, _REFUSED = "head", "body", "serving", "refused"
_LIMITS = "dagnet_server_limits"
_DEFAULT = ServerLimits()
_TOO_LARGE_BODY = b'{"error":"request head too large","reason":"head_too_large"}'
_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(_TOO_LARGE_BODY), _TOO_LARGE_BODY)
)


class GuardedProtocol(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` with the limits of :class:`ServerLimits` (see the module).

    The limits travel on the uvicorn config (:func:`guarded_config`), so worker
    processes, which receive a pickled copy of it, apply them too.
    """

    def __init__(self, config: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self.limits: ServerLimits = getattr(config, _LIMITS, _DEFAULT)
        self.cap = connection_cap(self.limits)
        self._phase = _HEAD
        self._since = 0.0
        self._head_bytes = 0
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.cap and not self._evict_one():
            transport.abort()
            return
        super().connection_made(transport)
        self._enter(_HEAD, self.limits.head_timeout_s)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()
        if self.transport is not None:
            super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._phase == _REFUSED:
            return
        if self._phase != _HEAD:
            super().data_received(data)
            return
        self._head_bytes += len(data)
        super().data_received(data)
        if self._phase == _HEAD and self._head_bytes > self.limits.max_head_bytes and not self.transport.is_closing():
            self._refuse_head()

    def on_headers_complete(self) -> None:
        self._enter(_BODY, self.limits.body_timeout_s)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._enter(_SERVING, None)
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._enter(_HEAD, self.limits.head_timeout_s)

    def _refuse_head(self) -> None:
        """431, then half-close and stop reading: nothing more of the head is taken in,
        and the reset comes :data:`LINGER_S` later, after the client could read the 431."""
        self.transport.write(_TOO_LARGE)
        self.transport.pause_reading()
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._enter(_REFUSED, LINGER_S)

    # -- phases and timers ------------------------------------------------------------

    def _enter(self, phase: str, timeout_s: float | None) -> None:
        self._cancel_timer()
        self._phase = phase
        self._since = self.loop.time()
        self._head_bytes = 0
        if timeout_s is not None:
            self._timer = self.loop.call_later(timeout_s, self._expired)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        self._timer = None
        self.transport.abort()

    def _evict_one(self) -> bool:
        """Abort the connection that has waited longest without being served; False if none."""
        waiting = [c for c in self.connections if isinstance(c, GuardedProtocol) and c._phase != _SERVING]
        if not waiting:
            return False
        victim = min(waiting, key=lambda c: c._since)
        victim._cancel_timer()
        victim.transport.abort()
        self.connections.discard(victim)
        return True


def guarded_config(app: Any, limits: ServerLimits, **options: Any) -> uvicorn.Config:
    """A ``uvicorn.Config`` for ``app`` (``options`` as uvicorn takes them) served through the guard."""
    config = uvicorn.Config(app, http=GuardedProtocol, timeout_keep_alive=limits.keep_alive_s, **options)
    setattr(config, _LIMITS, limits)
    return config
