"""``create_app``: the miner's FastAPI app, with its layers wrapped around the routes.

From the outside in (each layer is a pure ASGI middleware, one concern each):

1. request metrics — counts and times every response
2. signed-headers gate (guarded: public paths skip it) — 401/403/503 from the
   headers alone, before any body byte is read
3. body cap — 413 over ``max_body_bytes``, 503 ``busy`` past the bytes all bodies
   in flight may hold together; reads the body once for everyone inside, and
   cancels the request's work if its caller disconnects
4. the guards, which public paths (``/health``, ``/metrics``) skip (:class:`~miner.asgi.Guarded`):
   a. btauth — 401 unless signed for this miner
   b. blacklist — 503 until the metagraph is synced; 403 unregistered / no permit / low stake
   c. rate limit — 429 with ``Retry-After`` per hotkey
   d. stake priority — at most ``max_concurrency`` in flight, highest stake admitted first
5. the routes (:mod:`miner.handlers`)

With ``auth_enabled=False`` (benchmarks, trusted local runs) the gate and guards
a–c are left out: there is no verified hotkey to blacklist or rate-limit, and
every caller queues with equal priority. Limits below the ASGI app (head size,
read timeouts, the connection cap) are the server's: :mod:`miner.server`.
"""

from __future__ import annotations

from typing import Protocol

from bittensor.http_auth import NonceStore
from fastapi import FastAPI
from starlette.middleware import Middleware

from planners.base import Planner
from protocol.routes import FEEDBACK_PATH, HEALTH_PATH, METRICS_PATH, NODE_PATH, WORKFLOW_PATH
from protocol.version import package_version
from subnets.base import ToolRegistry
from subnets.runner import LocalRunner

from .asgi import Guarded
from .auth import BtAuthMiddleware, SignedHeadersGate
from .blacklist import Blacklist, BlacklistMiddleware
from .feedback import FeedbackInbox, FeedbackStore
from .handlers import MinerEndpoints, internal_error
from .limits import BodyCapMiddleware, RateLimitMiddleware
from .metagraph import MetagraphSource
from .nonces import nonce_store_for
from .priority import StakePriorityMiddleware
from .prometheus import MinerMetrics, RequestMetricsMiddleware
from .quota import PlanningQuota
from .serving import ToolMenu
from .settings import MinerSettings
from .workers import PlannerWorkers


class HasHotkey(Protocol):
    """Anything with the miner's hotkey address: a ``Keypair`` or a ``Wallet.hotkey``."""

    @property
    def ss58_address(self) -> str: ...


def create_app(
    settings: MinerSettings,
    *,
    keypair: HasHotkey,
    metagraph: MetagraphSource,
    registry: ToolRegistry,
    planner: Planner,
    auth_enabled: bool = True,
    nonce_store: NonceStore | None = None,
) -> FastAPI:
    """Build one miner app. ``nonce_store`` defaults to :func:`nonce_store_for`;
    pass one to share replay protection between apps you build yourself.

    ``app.state.metrics`` is the app's :class:`MinerMetrics`, ``app.state.feedback`` its
    :class:`FeedbackInbox`, ``app.state.planning`` its
    :class:`~miner.workers.PlannerWorkers` (started on first use; ``warm()`` starts
    them now, ``close()`` stops them). The feedback kept in ``settings.feedback_db`` is
    replayed into the planner's ``observe`` here.
    """
    hotkey = keypair.ss58_address
    store = None if settings.feedback_db is None else FeedbackStore(settings.feedback_db, hotkey)
    inbox = FeedbackInbox(planner, store)
    inbox.replay()
    metrics = MinerMetrics(actions=registry.names())
    metrics.follow(metagraph.snapshot, hotkey)
    endpoints = MinerEndpoints(
        hotkey=hotkey,
        metagraph=metagraph,
        planning=PlannerWorkers(planner, size=settings.planner.workers),
        quota=PlanningQuota(
            slots=settings.planner.workers,
            per_validator=settings.planner.per_validator,
            queue_per_validator=settings.planner.queue_per_validator,
            cpu_per_s=settings.planner.cpu_per_s,
            cpu_burst_s=settings.planner.cpu_burst_s,
        ),
        runner=LocalRunner(
            registry, subnets=settings.provider_subnets or None, by_task=settings.provider_tasks or None
        ),
        menu=ToolMenu(settings.serve, registry.names()),
        metrics=metrics,
        planner_timeout_s=settings.planner.timeout_s,
        inbox=inbox,
    )
    app = FastAPI(
        title="dagnet miner",
        version=package_version(),
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        # The miner exports its own Prometheus metrics; FastAPI's OpenTelemetry
        # hooks would cost a provider lookup on every request.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.metrics = metrics
    app.state.feedback = inbox
    app.state.planning = endpoints.planning
    app.add_exception_handler(Exception, internal_error)
    app.router.add_route(NODE_PATH, endpoints.node, methods=["POST"])  # the hot path first
    app.router.add_route(WORKFLOW_PATH, endpoints.workflow, methods=["POST"])
    app.router.add_route(FEEDBACK_PATH, endpoints.feedback, methods=["POST"])
    app.router.add_route(HEALTH_PATH, endpoints.health, methods=["GET"])
    app.router.add_route(METRICS_PATH, endpoints.prometheus, methods=["GET"])

    guards = _auth_layers(settings, hotkey, metagraph, metrics, nonce_store) if auth_enabled else []
    guards.append(Middleware(StakePriorityMiddleware, max_concurrency=settings.max_concurrency))
    layers = [Middleware(RequestMetricsMiddleware, metrics=metrics)]
    if auth_enabled:
        blacklist = Blacklist(
            metagraph, min_stake=settings.min_stake, require_validator_permit=settings.require_validator_permit
        )
        gate = Middleware(
            SignedHeadersGate, hotkey=hotkey, window=settings.auth, refusal=blacklist.check, metrics=metrics
        )
        layers.append(Middleware(Guarded, layers=[gate]))
    layers += [
        Middleware(
            BodyCapMiddleware, max_bytes=settings.max_body_bytes, max_buffered_bytes=settings.max_buffered_bytes
        ),
        Middleware(Guarded, layers=guards),
    ]
    for layer in reversed(layers):  # add_middleware puts each new layer outermost
        app.add_middleware(layer.cls, *layer.args, **layer.kwargs)
    return app


def _auth_layers(
    settings: MinerSettings,
    hotkey: str,
    metagraph: MetagraphSource,
    metrics: MinerMetrics,
    nonce_store: NonceStore | None,
) -> list[Middleware]:
    return [
        Middleware(
            BtAuthMiddleware,
            hotkey=hotkey,
            nonce_store=nonce_store if nonce_store is not None else nonce_store_for(settings),
            window=settings.auth,
            metrics=metrics,
        ),
        Middleware(
            BlacklistMiddleware,
            metagraph=metagraph,
            min_stake=settings.min_stake,
            require_validator_permit=settings.require_validator_permit,
            metrics=metrics,
        ),
        Middleware(
            RateLimitMiddleware,
            per_second=settings.rate_limit.per_second,
            burst=settings.rate_limit.burst,
        ),
    ]
