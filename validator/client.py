"""The validator's HTTP client for miners: signed, bounded, and never raising on peers.

Every request is signed with ``btauth/1`` over the exact bytes sent, with a fresh
nonce per request (a retry is a new request). A peer can be slow, silent, huge,
rude or gone: each of those comes back as a :class:`Reply` whose ``error`` is a
:class:`~validator.errors.PeerError` of that kind (returned, never raised), so one
bad miner cannot disturb a validation step.

A reply is read as the bytes on the wire, under the size cap. The client asks for
``Accept-Encoding: identity`` and decodes nothing: a reply that declares any other
``Content-Encoding`` is refused before its body is read, so a compressed bomb costs
what its headers cost.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import bittensor as bt
import httpx
from pydantic import BaseModel, ValidationError

from protocol.errors import format_validation_error
from protocol.feedback import StepFeedback
from protocol.limits import DEFAULT_LIMITS, Limits
from protocol.routes import FEEDBACK_PATH, NODE_PATH, WORKFLOW_PATH
from protocol.synapse import NodeSynapse, TaskPackage

from .errors import (
    PeerBadEncoding,
    PeerBadPayload,
    PeerBadStatus,
    PeerClosed,
    PeerError,
    PeerOversize,
    PeerRefused,
    PeerTimeout,
    PeerTransportError,
    RequestOversize,
)
from .settings import setting_default

_ERROR_EXCERPT = 200
_M = TypeVar("_M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class Reply:
    """What one request produced.

    ``status`` is ``None`` when no HTTP response arrived. ``error`` is ``None``
    exactly when the peer answered 2xx with a body within the size cap; otherwise
    it says what went wrong by its type (:mod:`validator.errors`).
    """

    status: int | None
    body: bytes | None
    error: PeerError | None
    elapsed_s: float
    url: str | None = None
    hotkey: str | None = None
    """The peer asked: its axon URL and hotkey."""

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def retryable(self) -> bool:
        """A transport failure (connect error, connection closed, 5xx) a caller may
        retry; timeouts are not retryable: the time is spent."""
        return self.error is not None and self.error.retryable

    def parsed(self, model: type[_M], what: str) -> _M:
        """The body as ``model``; :class:`PeerBadPayload` (naming ``what`` was expected)
        when it is not one. Only for a reply that is ``ok``."""
        try:
            return model.model_validate_json(self.body or b"")
        except ValidationError as exc:
            raise PeerBadPayload(what, format_validation_error(exc)).of_peer(self.url, self.hotkey) from None


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Transport settings. ``timeout_s`` bounds a whole request (connect to last
    byte) and must stay below one 12 s block so a step fits in a block.
    ``max_concurrency`` bounds requests in flight over all peers; the connection
    limits apply to each peer separately."""

    timeout_s: float = setting_default("query_timeout_s")
    connect_timeout_s: float = 2.0
    max_concurrency: int = 256
    max_connections_per_peer: int = 64
    max_keepalive_per_peer: int = 16


class _OriginPools(httpx.AsyncBaseTransport):
    """One small connection pool per peer origin, behind one transport.

    httpcore 1.0's pool rescans every connection it holds whenever a request
    arrives or finishes (quadratic in the pool's size, encode/httpcore#1035), so a
    single pool holding connections to a few hundred peers spends more time on
    bookkeeping than on I/O. Per-origin pools keep each scan to a handful of
    connections. The TLS context is built once and shared: building one per pool
    costs tens of milliseconds.
    """

    def __init__(self, limits: httpx.Limits) -> None:
        self._limits = limits
        self._tls = ssl.create_default_context()
        self._pools: dict[tuple[bytes, bytes, int | None], httpx.AsyncHTTPTransport] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        key = (url.raw_scheme, url.raw_host, url.port)
        pool = self._pools.get(key)
        if pool is None:
            pool = self._pools[key] = httpx.AsyncHTTPTransport(limits=self._limits, verify=self._tls)
        return await pool.handle_async_request(request)

    async def aclose(self) -> None:
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            await pool.aclose()


class MinerClient:
    """One ``httpx.AsyncClient`` shared by every request of a validator, pooling
    connections per peer (see :class:`_OriginPools`).

    Use as ``async with MinerClient(keypair) as client:``. ``own_s`` accumulates
    the time the client itself spends signing, encoding and collecting bodies on
    the event loop (not the time spent waiting for peers), so a benchmark can say
    how much of a step is the validator's own overhead.
    """

    def __init__(
        self,
        signer: Any,
        *,
        limits: Limits = DEFAULT_LIMITS,
        config: ClientConfig = ClientConfig(),
    ) -> None:
        self._signer = signer
        self._limits = limits
        self._config = config
        self._http: httpx.AsyncClient | None = None
        self._slots = asyncio.Semaphore(config.max_concurrency)
        self._last_nonce = 0
        self.own_s = 0.0
        self.requests = 0

    @property
    def hotkey(self) -> str:
        return self._signer.ss58_address

    @property
    def closed(self) -> bool:
        """Whether requests cannot be sent (outside ``async with``)."""
        return self._http is None

    async def __aenter__(self) -> MinerClient:
        cfg = self._config
        limits = httpx.Limits(
            max_connections=cfg.max_connections_per_peer, max_keepalive_connections=cfg.max_keepalive_per_peer
        )
        self._http = httpx.AsyncClient(
            transport=_OriginPools(limits),
            headers={"Content-Type": "application/json", "Accept-Encoding": "identity"},
            follow_redirects=False,
            trust_env=False,
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def query_workflow(
        self, axon_url: str, hotkey: str, package: TaskPackage, *, timeout_s: float | None = None
    ) -> Reply:
        """Ask a miner for a workflow plan for ``package``.

        A connection closed before any answer is tried once more (a new request, a new
        nonce) within what is left of the timeout: a miner drops an idle keep-alive
        connection at the moment the validator reuses it, and that race is nobody's fault.
        The query asks for a plan and changes nothing, so a repeat is harmless.
        """
        timeout = self._config.timeout_s if timeout_s is None else timeout_s
        body = self._encode(package)
        started = time.perf_counter()
        reply = await self.post(axon_url, hotkey, WORKFLOW_PATH, body, timeout_s=timeout)
        left = timeout - (time.perf_counter() - started)
        if not isinstance(reply.error, PeerClosed) or left <= 0:
            return reply
        again = await self.post(axon_url, hotkey, WORKFLOW_PATH, body, timeout_s=left)
        return replace(again, elapsed_s=time.perf_counter() - started)

    async def call_node(
        self, axon_url: str, hotkey: str, synapse: NodeSynapse, *, timeout_s: float | None = None
    ) -> Reply:
        """Ask a tool provider to run one resolved node."""
        return await self.post(axon_url, hotkey, NODE_PATH, self._encode(synapse), timeout_s=timeout_s)

    async def send_feedback(
        self, axon_url: str, hotkey: str, feedback: StepFeedback, *, timeout_s: float | None = None
    ) -> Reply:
        """Tell a miner how its own step went (``POST /Feedback``); never retried."""
        return await self.post(axon_url, hotkey, FEEDBACK_PATH, self._encode(feedback), timeout_s=timeout_s)

    async def post(
        self, axon_url: str, hotkey: str, path: str, body: bytes, *, timeout_s: float | None = None
    ) -> Reply:
        """Sign and send ``body`` (at most ``limits.max_request_bytes``); collect at most
        ``limits.max_response_bytes`` back."""
        if self._http is None:
            raise RuntimeError("MinerClient is not open: use 'async with MinerClient(...)'")
        timeout = self._config.timeout_s if timeout_s is None else timeout_s
        if len(body) > self._limits.max_request_bytes:
            too_large = RequestOversize(len(body), self._limits.max_request_bytes)
            return _failure(too_large.of_peer(axon_url, hotkey), time.perf_counter())
        async with self._slots:
            self.requests += 1
            started = time.perf_counter()
            try:
                async with asyncio.timeout(timeout):
                    return await self._exchange(axon_url, hotkey, path, body, timeout, started)
            except (PeerError, TimeoutError, httpx.HTTPError, httpx.InvalidURL, OSError, ValueError) as exc:
                return _failure(_classified(exc, timeout).of_peer(axon_url, hotkey), started)

    async def _exchange(
        self, axon_url: str, hotkey: str, path: str, body: bytes, timeout: float, started: float
    ) -> Reply:
        http = self._http
        if http is None:  # closed while this request waited for a slot
            raise RuntimeError("MinerClient was closed while a request waited to be sent")
        tick = time.perf_counter()
        headers = bt.http_auth.sign(
            self._signer, method="POST", path=path, body=body, receiver_ss58=hotkey, nonce_ns=self._next_nonce()
        )
        self.own_s += time.perf_counter() - tick
        phases = httpx.Timeout(timeout, connect=min(timeout, self._config.connect_timeout_s))
        request = http.build_request("POST", axon_url + path, content=body, headers=headers, timeout=phases)
        response = await http.send(request, stream=True)
        try:
            data = await self._read_capped(response)
        finally:
            await response.aclose()
        elapsed = time.perf_counter() - started
        if 200 <= response.status_code < 300:
            return Reply(response.status_code, data, None, elapsed, axon_url, hotkey)
        excerpt = data[:_ERROR_EXCERPT].decode("utf-8", "replace")
        error = PeerBadStatus(response.status_code, excerpt, _refusal_reason(data)).of_peer(axon_url, hotkey)
        return Reply(response.status_code, data, error, elapsed, axon_url, hotkey)

    async def _read_capped(self, response: httpx.Response) -> bytes:
        """The body as sent (``aiter_raw``: nothing decoded), at most ``max_response_bytes``."""
        encoding = _unrequested_encoding(response.headers)
        if encoding is not None:
            raise PeerBadEncoding(encoding)
        cap = self._limits.max_response_bytes
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > cap:
            raise PeerOversize(cap, int(declared))
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_raw():
            size += len(chunk)
            if size > cap:
                raise PeerOversize(cap)
            chunks.append(chunk)
        tick = time.perf_counter()
        data = b"".join(chunks)
        self.own_s += time.perf_counter() - tick
        return data

    def _encode(self, model: TaskPackage | NodeSynapse | StepFeedback) -> bytes:
        tick = time.perf_counter()
        body = model.model_dump_json(by_alias=True, exclude_none=True).encode()
        self.own_s += time.perf_counter() - tick
        return body

    def _next_nonce(self) -> int:
        """Strictly increasing nanosecond nonces: two requests never share one."""
        nonce = max(time.time_ns(), self._last_nonce + 1)
        self._last_nonce = nonce
        return nonce


def _failure(error: PeerError, started: float) -> Reply:
    return Reply(None, None, error, time.perf_counter() - started, error.url, error.hotkey)


def _classified(exc: BaseException, timeout: float) -> PeerError:
    """What a failed exchange means, as its :class:`PeerError` (``exc`` as its cause)."""
    if isinstance(exc, PeerError):
        return exc
    if isinstance(exc, TimeoutError):
        error: PeerError = PeerTimeout(timeout)
    elif isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
        error = PeerRefused(_describe(exc))
    elif isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        error = PeerClosed(_describe(exc))
    elif isinstance(exc, httpx.TimeoutException):
        error = PeerTimeout(None, _describe(exc))
    else:
        error = PeerTransportError(_describe(exc))
    error.__cause__ = exc
    return error


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text[:_ERROR_EXCERPT]


def _unrequested_encoding(headers: httpx.Headers) -> str | None:
    """The reply's ``Content-Encoding`` when it names anything but ``identity`` (the only
    coding the client accepts), else ``None``. Repeated headers count together."""
    declared = headers.get("content-encoding", "")
    codings = {coding.strip().lower() for coding in declared.split(",")} - {"", "identity"}
    return declared.strip()[:_ERROR_EXCERPT] if codings else None


def _refusal_reason(body: bytes) -> str | None:
    """The ``reason`` of a refusal in dagnet's error JSON (:func:`protocol.routes.error_body`),
    or ``None`` when the body is anything else."""
    try:
        parsed = json.loads(body[:4096])  # a refusal is one short line; anything longer is not one
    except ValueError:
        return None
    reason = parsed.get("reason") if isinstance(parsed, dict) else None
    return reason if isinstance(reason, str) else None
