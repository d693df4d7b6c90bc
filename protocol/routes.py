"""The miner's HTTP routes: the paths validators call and operators scrape.

A synapse is served at ``/<its class name>``; ``/health`` and ``/metrics`` are
public (no signature, no blacklist, no rate limit, no queue). Every refusal,
whichever layer or handler sends it, has the body :func:`error_body` builds.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "FEEDBACK_PATH",
    "HEALTH_PATH",
    "METRICS_PATH",
    "NODE_PATH",
    "PATHS",
    "PUBLIC_PATHS",
    "WORKFLOW_PATH",
    "error_body",
]

WORKFLOW_PATH = "/WorkflowSynapse"
"""``POST``: a task package in, a workflow plan out."""
NODE_PATH = "/NodeSynapse"
"""``POST``: one resolved node in, its output out."""
FEEDBACK_PATH = "/Feedback"
"""``POST``: a validator's :class:`~protocol.feedback.StepFeedback` about this miner's own step in."""
HEALTH_PATH = "/health"
"""``GET``: liveness and readiness."""
METRICS_PATH = "/metrics"
"""``GET``: Prometheus exposition."""

PUBLIC_PATHS = frozenset({HEALTH_PATH, METRICS_PATH})
PATHS = frozenset({WORKFLOW_PATH, NODE_PATH, FEEDBACK_PATH, HEALTH_PATH, METRICS_PATH})


def error_body(reason: str, message: str, **extra: Any) -> bytes:
    """A refusal's JSON body: ``{"error": message, "reason": reason, ...extra}``.

    ``reason`` is a short code for programs (``bad_signature``, ``rate_limited``),
    ``message`` one line for people; ``extra`` adds details such as ``retry_after_s``.
    """
    return json.dumps({"error": message, "reason": reason, **extra}, separators=(",", ":")).encode()
