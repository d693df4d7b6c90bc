"""The validator's HTTP client for miners: signed, bounded, and never raising on peers.

Every request is signed with ``btauth/1`` over the exact bytes sent, with a fresh
nonce per request (a retry is a new request). A peer can be slow, silent, huge,
rude or gone: each of those comes back as a :class:`Reply` with ``error`` set,
never as an exception, so one bad miner cannot disturb a validation step.

A reply is read as the bytes on the wire, under the size cap. The client asks for
``Accept-Encoding: identity`` and decodes nothing: a reply that declares any other
``Content-Encoding`` is refused before its body is read, so a compressed bomb costs
what its headers cost.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from dataclasses import dataclass, replace
from typing import Any

import bittensor as bt
import httpx

from protocol.limits import DEFAULT_LIMITS, Limits
from protocol.routes import NODE_PATH, WORKFLOW_PATH
from protocol.synapse import NodeSynapse, TaskPackage

_ERROR_EXCERPT = 200
_CLOSED = "connection closed"


@dataclass(frozen=True, slots=True)
class Reply:
    """What one request produced.

    ``status`` is ``None`` when no HTTP response arrived. ``error`` is ``None``
    exactly when the peer answered 2xx with a body within the size cap.
    ``retryable`` marks transport failures (connect error, connection closed,
    5xx) that a caller may retry; timeouts are not retryable: the time is spent.
    """

    status: int | None
    body: bytes | None
    error: str | None
    elapsed_s: float
    retryable: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Transport settings. ``timeout_s`` bounds a whole request (connect to last
    byte) and must stay below one 12 s block so a step fits in a block.
    ``max_concurrency`` bounds requests in flight over all peers; the connection
    limits apply to each peer separately."""

    timeout_s: float = 8.0
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


class _Refused(Exception):
    """A reply the client will not read: over the size cap, or in an encoding it did not ask for."""


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
        if reply.ok or not reply.error.startswith(_CLOSED) or left <= 0:
            return reply
        again = await self.post(axon_url, hotkey, WORKFLOW_PATH, body, timeout_s=left)
        return replace(again, elapsed_s=time.perf_counter() - started)

    async def call_node(
        self, axon_url: str, hotkey: str, synapse: NodeSynapse, *, timeout_s: float | None = None
    ) -> Reply:
        """Ask a tool provider to run one resolved node."""
        return await self.post(axon_url, hotkey, NODE_PATH, self._encode(synapse), timeout_s=timeout_s)

    async def post(self, axon_url: str, hotkey: str, path: str, body: bytes, *, timeout_s: float | None = None) -> Reply:
        """Sign and send ``body`` (at most ``limits.max_request_bytes``); collect at most
        ``limits.max_response_bytes`` back."""
        if self._http is None:
            raise RuntimeError("MinerClient is not open: use 'async with MinerClient(...)'")
        timeout = self._config.timeout_s if timeout_s is None else timeout_s
        if len(body) > self._limits.max_request_bytes:
            return _failure(f"request body of {len(body)} bytes over the {self._limits.max_request_bytes}-byte limit; not sent",
                            time.perf_counter())
        async with self._slots:
            self.requests += 1
            started = time.perf_counter()
            try:
                async with asyncio.timeout(timeout):
                    return await self._exchange(axon_url + path, hotkey, path, body, timeout, started)
            except TimeoutError:
                return _failure(f"timeout after {timeout:g}s", started)
            except _Refused as exc:
                return _failure(str(exc), started)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                return _failure(f"connect error: {_describe(exc)}", started, retryable=True)
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
                return _failure(f"{_CLOSED}: {_describe(exc)}", started, retryable=True)
            except httpx.TimeoutException as exc:
                return _failure(f"timeout: {_describe(exc)}", started)
            except (httpx.HTTPError, httpx.InvalidURL, OSError, ValueError) as exc:
                return _failure(f"transport error: {_describe(exc)}", started)

    async def _exchange(self, url: str, hotkey: str, path: str, body: bytes, timeout: float, started: float) -> Reply:
        tick = time.perf_counter()
        headers = bt.http_auth.sign(
            self._signer, method="POST", path=path, body=body, receiver_ss58=hotkey, nonce_ns=self._next_nonce()
        )
        self.own_s += time.perf_counter() - tick
        phases = httpx.Timeout(timeout, connect=min(timeout, self._config.connect_timeout_s))
        request = self._http.build_request("POST", url, content=body, headers=headers, timeout=phases)
        response = await self._http.send(request, stream=True)
        try:
            data = await self._read_capped(response)
        finally:
            await response.aclose()
        elapsed = time.perf_counter() - started
        if 200 <= response.status_code < 300:
            return Reply(response.status_code, data, None, elapsed)
        excerpt = data[:_ERROR_EXCERPT].decode("utf-8", "replace")
        return Reply(
            response.status_code, data, f"http {response.status_code}: {excerpt}", elapsed,
            retryable=response.status_code >= 500,
        )

    async def _read_capped(self, response: httpx.Response) -> bytes:
        """The body as sent (``aiter_raw``: nothing decoded), at most ``max_response_bytes``."""
        encoding = _unrequested_encoding(response.headers)
        if encoding is not None:
            raise _Refused(f"unrequested content-encoding {encoding}")
        cap = self._limits.max_response_bytes
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > cap:
            raise _Refused(f"response over {cap} bytes (content-length {declared})")
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_raw():
            size += len(chunk)
            if size > cap:
                raise _Refused(f"response over {cap} bytes")
            chunks.append(chunk)
        tick = time.perf_counter()
        data = b"".join(chunks)
        self.own_s += time.perf_counter() - tick
        return data

    def _encode(self, model: TaskPackage | NodeSynapse) -> bytes:
        tick = time.perf_counter()
        body = model.model_dump_json(by_alias=True, exclude_none=True).encode()
        self.own_s += time.perf_counter() - tick
        return body

    def _next_nonce(self) -> int:
        """Strictly increasing nanosecond nonces: two requests never share one."""
        nonce = max(time.time_ns(), self._last_nonce + 1)
        self._last_nonce = nonce
        return nonce


def _failure(error: str, started: float, *, retryable: bool = False) -> Reply:
    return Reply(None, None, error, time.perf_counter() - started, retryable=retryable)


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text[:_ERROR_EXCERPT]


def _unrequested_encoding(headers: httpx.Headers) -> str | None:
    """The reply's ``Content-Encoding`` when it names anything but ``identity`` (the only
    coding the client accepts), else ``None``. Repeated headers count together."""
    declared = headers.get("content-encoding", "")
    codings = {coding.strip().lower() for coding in declared.split(",")} - {"", "identity"}
    return declared.strip()[:_ERROR_EXCERPT] if codings else None
