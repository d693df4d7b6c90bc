"""The ``btauth/1`` layers: every non-public request must be signed for this miner.

:class:`SignedHeadersGate` sits outside the body cap and refuses, before a byte
of the body is read, what the headers alone condemn: a missing or malformed
signature header, a request bound to another receiver, a stale nonce, or a
claimed hotkey the blacklist would refuse. So an unauthenticated caller never
makes the miner buffer its body.

:class:`BtAuthMiddleware` then verifies with ``bittensor.http_auth.verify`` over
the exact body bytes the body cap layer read (``scope[BODY]``; that layer must
sit outside this one). A failure is a 401 whose JSON names the reason; success
puts the caller's hotkey in ``scope[HOTKEY]`` for the layers and handlers inside.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any

from bittensor import http_auth
from bittensor.http_auth import AuthError, NonceStore

from .asgi import BODY, HOTKEY, ASGIApp, Receive, Scope, Send, send_error
from .prometheus import MinerMetrics
from .settings import AuthWindow

_REASONS: tuple[tuple[type[AuthError], str], ...] = (
    (http_auth.BadSignature, "bad_signature"),
    (http_auth.WrongReceiver, "wrong_receiver"),
    (http_auth.StaleRequest, "stale"),
    (http_auth.ReplayedRequest, "replayed"),
    (http_auth.MalformedAuth, "malformed"),
)

_HEADER_PREFIX = b"x-bittensor-"


def _scheme_kwargs() -> dict[str, Any]:
    """Pin sr25519 on bittensor releases whose ``verify`` takes a scheme argument.

    Detected once at import. A parameter named like ``allowed_schemes`` gets a
    tuple, one named like ``scheme`` a string; 11.3 has neither (the scheme
    comes from the request and defaults to sr25519).
    """
    for name in inspect.signature(http_auth.verify).parameters:
        if "scheme" in name:
            return {name: ("sr25519",) if name.endswith("s") else "sr25519"}
    return {}


_SCHEME_KWARGS = _scheme_kwargs()


def failure_reason(error: AuthError) -> str:
    """The short reason code of an auth failure, as sent in the 401 body."""
    for cls, reason in _REASONS:
        if isinstance(error, cls):
            return reason
    return "malformed"


class BtAuthMiddleware:
    """401 unless the request carries a valid, fresh, unreplayed signature
    from any hotkey, bound to ``hotkey`` (this miner)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        hotkey: str,
        nonce_store: NonceStore,
        window: AuthWindow,
        metrics: MinerMetrics,
    ) -> None:
        self.app = app
        self.metrics = metrics
        metrics.declare_auth_failures(reason for _, reason in _REASONS)
        self._verify_kwargs = {
            "self_hotkey_ss58": hotkey,
            "max_age": window.max_age_s,
            "allowed_skew": window.allowed_skew_s,
            "nonce_store": nonce_store,
            **_SCHEME_KWARGS,
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            caller = http_auth.verify(
                _auth_headers(scope),
                scope[BODY],
                method=scope["method"],
                path=_request_target(scope),
                **self._verify_kwargs,
            )
        except AuthError as exc:
            reason = failure_reason(exc)
            self.metrics.auth_failure(reason)
            await send_error(send, 401, reason, str(exc))
            return
        scope[HOTKEY] = caller.hotkey_ss58
        await self.app(scope, receive, send)


def _auth_headers(scope: Scope) -> dict[str, str]:
    """Only the ``X-Bittensor-*`` headers, as the str mapping ``verify`` wants."""
    return {
        name.decode("latin-1"): value.decode("latin-1")
        for name, value in scope["headers"]
        if name.startswith(_HEADER_PREFIX)
    }


def _request_target(scope: Scope) -> str:
    """The path as the client sent (and signed) it, with its query string."""
    raw_path = scope.get("raw_path")
    path = raw_path.decode("latin-1") if raw_path else scope["path"]
    query = scope.get("query_string")
    return f"{path}?{query.decode('latin-1')}" if query else path


Refusal = Callable[[str], "tuple[int, str, str] | None"]
"""``claimed hotkey -> (status, reason, message)`` when the blacklist would refuse it."""


def _claimed_hotkey(headers: dict[str, str]) -> str:
    return next(value for name, value in headers.items() if name.lower() == http_auth.HEADER_HOTKEY.lower())


def header_failure(headers: dict[str, str], *, hotkey: str, window: AuthWindow, now_ns: int) -> AuthError | None:
    """What ``verify`` would refuse in ``headers`` without looking at the body, or ``None``.

    The same checks in the same order as ``bittensor.http_auth.verify`` up to the
    signature: header shape, receiver binding, freshness.
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    if lowered.get(http_auth.HEADER_VERSION.lower()) != http_auth.VERSION:
        return http_auth.MalformedAuth(f"missing or unsupported {http_auth.HEADER_VERSION}")
    for name in (http_auth.HEADER_HOTKEY, http_auth.HEADER_SIGNATURE):
        if not lowered.get(name.lower()):
            return http_auth.MalformedAuth(f"missing {name}")
    raw_nonce = lowered.get(http_auth.HEADER_NONCE.lower(), "")
    if not raw_nonce.isdigit() or len(raw_nonce) > 20:
        return http_auth.MalformedAuth(f"missing or malformed {http_auth.HEADER_NONCE}")
    if lowered.get(http_auth.HEADER_RECEIVER.lower()) != hotkey:
        return http_auth.WrongReceiver("request was not signed for this receiving hotkey")
    nonce = int(raw_nonce)
    if now_ns - nonce > window.max_age_s * 1e9 or nonce - now_ns > window.allowed_skew_s * 1e9:
        return http_auth.StaleRequest("nonce is outside the freshness window")
    return None


class SignedHeadersGate:
    """401/403/503 from the headers alone, before the body is read (see the module).

    Public paths never reach it: :func:`~miner.app.create_app` wraps it in a
    :class:`~miner.asgi.Guarded` of its own, outside the body cap.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        hotkey: str,
        window: AuthWindow,
        refusal: Refusal,
        metrics: MinerMetrics,
    ) -> None:
        self.app = app
        self.hotkey = hotkey
        self.window = window
        self.refusal = refusal
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _auth_headers(scope)
        error = header_failure(headers, hotkey=self.hotkey, window=self.window, now_ns=time.time_ns())
        if error is not None:
            reason = failure_reason(error)
            self.metrics.auth_failure(reason)
            await send_error(send, 401, reason, str(error))
            return
        refused = self.refusal(_claimed_hotkey(headers))
        if refused is not None:
            status, reason, message = refused
            self.metrics.blacklisted(reason)
            await send_error(send, status, reason, message)
            return
        await self.app(scope, receive, send)
