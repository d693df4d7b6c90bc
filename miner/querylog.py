"""One INFO line per query, so a miner's operator sees why each score is what it is.

:func:`logged_query` wraps the ``/WorkflowSynapse`` handler: after it answers, one line
names the validator (its hotkey's first characters), the task and its hint tier, the
outcome (``planned``, ``unplannable`` and why, or ``refused`` with the status, reason
and message) and the milliseconds the handler took. :class:`RefusalLog` does the same
for the requests the blacklist refuses before any handler runs; refusals of hotkeys
that are not on the metagraph (anyone can send those) are logged at most once per
:data:`UNREGISTERED_EVERY_S`, with how many there were since.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .asgi import caller_hotkey

log = logging.getLogger("dagnet.miner")

PACKAGE = "dagnet.package"
"""Scope key: the task package the handler parsed, for the query's log line."""
UNREGISTERED_EVERY_S = 60.0
"""At most one line per this many seconds for refused callers that are not registered."""

Handler = Callable[[Any, Request], Awaitable[Response]]


def short(hotkey: str | None) -> str:
    """A hotkey's first characters, as logs show it (``?`` when the caller is unknown)."""
    return "?" if not hotkey else f"{hotkey[:8]}…"


def logged_query(handler: Handler) -> Handler:
    """``handler`` with one INFO line per query (see the module)."""

    @functools.wraps(handler)
    async def logged(self: Any, request: Request) -> Response:
        started = time.perf_counter()
        response = await handler(self, request)
        package = request.scope.get(PACKAGE)
        task = "?" if package is None else f"{package.task_id} ({package.hint_tier} tier)"
        log.info(
            "query from %s: task %s: %s in %.0f ms",
            short(caller_hotkey(request.scope)),
            task,
            outcome(response),
            (time.perf_counter() - started) * 1000,
        )
        return response

    return logged


def outcome(response: Response) -> str:
    """``planned``, ``unplannable: why`` or ``refused STATUS REASON: why`` for an answer."""
    if 200 <= response.status_code < 300:
        return "planned"
    try:
        body = json.loads(bytes(response.body))
    except ValueError:
        body = {}
    reason, message = (body.get("reason"), body.get("error")) if isinstance(body, dict) else (None, None)
    if reason == "unplannable":
        return f"unplannable: {message}"
    return f"refused {response.status_code} {reason or ''}: {message or ''}".rstrip(": ")


class RefusalLog:
    """Logs the blacklist's refusals (see the module). Used from the event loop only."""

    def __init__(self) -> None:
        self._next_unregistered = 0.0
        self._unregistered_since = 0

    def refused(self, hotkey: str, status: int, reason: str, message: str) -> None:
        if reason == "unregistered":
            self._unregistered_since += 1
            now = time.monotonic()
            if now < self._next_unregistered:
                return
            self._next_unregistered = now + UNREGISTERED_EVERY_S
            count, self._unregistered_since = self._unregistered_since, 0
            message = f"{message} ({count} such refusal{'s' if count > 1 else ''} since the last line)"
        log.info("query from %s: refused %s %s: %s", short(hotkey), status, reason, message)
