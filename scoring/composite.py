"""The composite score of one execution (docs/scoring.md), identical bit for bit on every validator.

```
S = 0.50·S_success + 0.25·S_cost + 0.15·S_latency + 0.10·S_reliability
S = 0 when output_quality = 0
```

A wrong answer earns nothing: without the second line a plan that returns an empty
string reliably would still collect the reliability term.

Every published value is rounded to 9 decimals, and ``S`` is computed from the
rounded terms, so anyone can recompute it from a run report. The efficiency gate
reads the rounded ``S_success``: a product that is 0.7 up to float noise counts as
0.7 and keeps the gate closed.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from protocol.run_metrics import RunMetrics
from protocol.score_weights import GATE, W_COST, W_LATENCY, W_RELIABILITY, W_SUCCESS

PENALTY_UNPLANNED_RETRY = 0.10
PENALTY_TIMEOUT = 0.20
PENALTY_HARD_FAILURE = 0.50

DIGITS = 9


class Score(BaseModel):
    model_config = ConfigDict(frozen=True)

    S: float
    S_success: float
    S_cost: float
    S_latency: float
    S_reliability: float
    output_quality: float
    completion_ratio: float
    details: dict[str, Any] = Field(default_factory=dict)


def composite(
    *,
    output_quality: float,
    metrics: RunMetrics,
    max_budget_tao: float | None,
    max_latency_seconds: float,
) -> Score:
    """Score one execution.

    ``max_budget_tao`` None (no budget given) makes S_cost 0: a run cannot be
    cheap relative to nothing. Non-finite or out-of-range inputs are clamped
    (quality and completion into [0, 1], negative costs and latencies to 0), never
    raised on.
    """
    quality = _round(_unit(output_quality))
    completion = _round(_unit(metrics.completion_ratio))
    s_success = _round(quality * completion)
    gate_open = s_success > GATE
    s_cost = _round(_headroom(metrics.cost_tao, max_budget_tao)) if gate_open else 0.0
    s_latency = _round(_headroom(metrics.latency_s, max_latency_seconds)) if gate_open else 0.0
    s_reliability = _round(_reliability(metrics))
    weighted = W_SUCCESS * s_success + W_COST * s_cost + W_LATENCY * s_latency + W_RELIABILITY * s_reliability
    total = _round(weighted) if quality > 0 else 0.0
    details: dict[str, Any] = {
        "gate_open": gate_open,
        "cost_tao": metrics.cost_tao,
        "latency_s": metrics.latency_s,
        "max_budget_tao": max_budget_tao,
        "max_latency_seconds": max_latency_seconds,
        "unplanned_retries": metrics.unplanned_retries,
        "timeouts": metrics.timeouts,
        "hard_failures": metrics.hard_failures,
    }
    if quality == 0:
        details["S_reason"] = "output_quality is 0: S is 0"
    if max_budget_tao is None:
        details["S_cost_reason"] = "no max_budget_tao: S_cost is 0"
    return Score(
        S=total,
        S_success=s_success,
        S_cost=s_cost,
        S_latency=s_latency,
        S_reliability=s_reliability,
        output_quality=quality,
        completion_ratio=completion,
        details=details,
    )


def invalid_score(reason: str) -> Score:
    """The score of an invalid response or run: zero everywhere, with the reason."""
    return Score(
        S=0.0,
        S_success=0.0,
        S_cost=0.0,
        S_latency=0.0,
        S_reliability=0.0,
        output_quality=0.0,
        completion_ratio=0.0,
        details={"invalid": True, "reason": reason},
    )


def _reliability(metrics: RunMetrics) -> float:
    penalty = (
        PENALTY_UNPLANNED_RETRY * max(metrics.unplanned_retries, 0)
        + PENALTY_TIMEOUT * max(metrics.timeouts, 0)
        + PENALTY_HARD_FAILURE * max(metrics.hard_failures, 0)
    )
    return min(max(1.0 - penalty, 0.0), 1.0)


def _headroom(used: float, limit: float | None) -> float:
    """``max(0, 1 − used/limit)``; 0 when there is no usable limit or ``used`` is not a number."""
    if limit is None or not math.isfinite(limit) or limit <= 0 or not math.isfinite(used):
        return 0.0
    return max(0.0, 1.0 - max(used, 0.0) / limit)


def _unit(value: float) -> float:
    if not math.isfinite(value):
        return 0.0
    return min(max(float(value), 0.0), 1.0)


def _round(value: float) -> float:
    return round(value, DIGITS) + 0.0  # + 0.0 turns -0.0 into 0.0


def explain(score: Score, reason: str | None = None) -> str:
    """One line saying what ``score`` is made of, or (``reason``) why it is 0."""
    if reason is not None:
        return f"S=0: {reason}"
    why = score.details.get("S_reason")
    return (
        f"S={score.S:.3f} (success {score.S_success:.3f} = quality {score.output_quality:.3f}"
        f" x completion {score.completion_ratio:.3f}; cost {score.S_cost:.3f}, latency {score.S_latency:.3f},"
        f" reliability {score.S_reliability:.3f})" + (f": {why}" if why else "")
    )
