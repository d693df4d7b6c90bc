"""The miner's Prometheus metrics, in a registry of their own.

Each app gets its own :class:`CollectorRegistry`, so several miners in one
process (tests, benchmarks) never collide. Label values are bounded: unknown
paths are counted as ``other`` and unknown actions as ``unknown``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from planners.base import FAILURE_KINDS
from protocol.metagraph import MetagraphSnapshot
from protocol.routes import PATHS

from .asgi import ASGIApp, Message, Receive, Scope, Send

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class MinerMetrics:
    """Requests by endpoint and code, their latency, auth and blacklist refusals
    by reason, node calls by action and outcome, and planner failures by kind."""

    def __init__(self, *, actions: Iterable[str] = (), registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._actions = frozenset(actions)
        self._requests = Counter(
            "dagnet_miner_requests_total",
            "HTTP requests answered, by endpoint and status code.",
            ["endpoint", "code"],
            registry=self.registry,
        )
        self._latency = Histogram(
            "dagnet_miner_request_latency_seconds",
            "Time from a request's arrival to its response, by endpoint.",
            ["endpoint"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._auth_failures = Counter(
            "dagnet_miner_auth_failures_total",
            "Requests refused by btauth verification (401), by reason.",
            ["reason"],
            registry=self.registry,
        )
        self._blacklisted = Counter(
            "dagnet_miner_blacklisted_total",
            "Authenticated requests refused by the blacklist (403/503), by reason.",
            ["reason"],
            registry=self.registry,
        )
        self._node_calls = Counter(
            "dagnet_miner_node_calls_total",
            "NodeSynapse calls served, by action and outcome (success, error, timeout).",
            ["action", "outcome"],
            registry=self.registry,
        )
        self._planner_failures = Counter(
            "dagnet_miner_planner_failures_total",
            "WorkflowSynapse queries the planner could not answer, by kind (unplannable, error, timeout, invalid).",
            ["kind"],
            registry=self.registry,
        )
        self.planner_failure_counts: dict[str, int] = {kind: 0 for kind in FAILURE_KINDS}
        for kind in FAILURE_KINDS:
            self._planner_failures.labels(kind)
        self._chain_block = Gauge(
            "dagnet_miner_chain_block",
            "The block of the metagraph this miner serves on (NaN before the first sync).",
            registry=self.registry,
        )
        self._registered = Gauge(
            "dagnet_miner_registered",
            "1 when this miner's hotkey is in its metagraph, 0 when not or not yet synced.",
            registry=self.registry,
        )
        # labels() takes a lock and hashes; the hot path reuses the children.
        self._request_children: dict[tuple[str, int], Counter] = {}
        self._latency_children: dict[str, Histogram] = {}
        self._node_children: dict[tuple[str, str], Counter] = {}

    def follow(self, snapshot: Callable[[], MetagraphSnapshot | None], hotkey: str) -> None:
        """Read the chain block and registration from ``snapshot()`` at each scrape."""

        def block() -> float:
            current = snapshot()
            return float("nan") if current is None else float(current.block)

        def registered() -> float:
            current = snapshot()
            return float(current is not None and current.by_hotkey(hotkey) is not None)

        self._chain_block.set_function(block)
        self._registered.set_function(registered)

    def observe_request(self, path: str, status: int, seconds: float) -> None:
        endpoint = path if path in PATHS else "other"
        key = (endpoint, status)
        counter = self._request_children.get(key)
        if counter is None:
            counter = self._request_children[key] = self._requests.labels(endpoint, str(status))
        histogram = self._latency_children.get(endpoint)
        if histogram is None:
            histogram = self._latency_children[endpoint] = self._latency.labels(endpoint)
        counter.inc()
        histogram.observe(seconds)

    def declare_auth_failures(self, reasons: Iterable[str]) -> None:
        """Every reason the auth layer can give, at 0 from the start, so rates have data."""
        for reason in reasons:
            self._auth_failures.labels(reason)

    def auth_failure(self, reason: str) -> None:
        self._auth_failures.labels(reason).inc()

    def blacklisted(self, reason: str) -> None:
        self._blacklisted.labels(reason).inc()

    def node_call(self, action: str, outcome: str) -> None:
        key = (action if action in self._actions else "unknown", outcome)
        counter = self._node_children.get(key)
        if counter is None:
            counter = self._node_children[key] = self._node_calls.labels(*key)
        counter.inc()

    def planner_failure(self, kind: str) -> None:
        """One query the planner did not answer (``kind``: one of :data:`FAILURE_KINDS`)."""
        self.planner_failure_counts[kind] += 1
        self._planner_failures.labels(kind).inc()

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class RequestMetricsMiddleware:
    """The outermost layer: counts every response by endpoint and status and times it.

    A request that raises is counted as a 500 (the error middleware outside
    answers it) and the exception propagates unchanged.
    """

    def __init__(self, app: ASGIApp, *, metrics: MinerMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            self.metrics.observe_request(scope["path"], status, time.perf_counter() - start)
