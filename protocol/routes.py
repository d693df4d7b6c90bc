"""The miner's HTTP routes: the paths validators call and operators scrape.

A synapse is served at ``/<its class name>``; ``/health`` and ``/metrics`` are
public (no signature, no blacklist, no rate limit, no queue).
"""

from __future__ import annotations

__all__ = ["HEALTH_PATH", "METRICS_PATH", "NODE_PATH", "PATHS", "PUBLIC_PATHS", "WORKFLOW_PATH"]

WORKFLOW_PATH = "/WorkflowSynapse"
"""``POST``: a task package in, a workflow plan out."""
NODE_PATH = "/NodeSynapse"
"""``POST``: one resolved node in, its output out."""
HEALTH_PATH = "/health"
"""``GET``: liveness and readiness."""
METRICS_PATH = "/metrics"
"""``GET``: Prometheus exposition."""

PUBLIC_PATHS = frozenset({HEALTH_PATH, METRICS_PATH})
PATHS = frozenset({WORKFLOW_PATH, NODE_PATH, HEALTH_PATH, METRICS_PATH})
