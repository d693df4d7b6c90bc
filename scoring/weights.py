"""From per-miner scores to on-chain weights: warm-up, softmax normalisation, u16 encoding."""

from __future__ import annotations

import math
from collections.abc import Mapping

U16_MAX = 65535


def warmup_scale(tasks_seen: int, in_immunity: bool, full_at: int = 20) -> float:
    """``min(1, tasks_seen / full_at)`` while the miner is in immunity, else 1."""
    if full_at <= 0:
        raise ValueError(f"full_at must be positive, got {full_at}")
    if not in_immunity:
        return 1.0
    return min(1.0, max(tasks_seen, 0) / full_at)


TEMPERATURE = 0.06
"""Softmax temperature: a miner 0.06 behind another gets 1/e of its weight (docs/scoring.md)."""


def normalize_weights(scores: Mapping[int, float], *, temperature: float = TEMPERATURE) -> dict[int, float]:
    """Weights from windowed mean scores: a softmax over the positive ones, summing to 1.

    ``w_i ∝ exp(s_i / temperature)`` for every miner with ``s_i > 0``; a miner at 0 (or
    negative, NaN, infinite) gets no weight. The ratio of two miners' weights depends only
    on the difference of their scores, ``exp(Δ / temperature)``, at every level and
    network size, and a higher score never gets less weight. Scores are clamped to 1.
    No positive score (or no scores) gives ``{}``: the caller decides what to put on chain.
    """
    if not 0 < temperature < math.inf:
        raise ValueError(f"temperature must be a positive number, got {temperature}")
    positive = {uid: min(value, 1.0) for uid, value in sorted(scores.items()) if _positive(value)}
    if not positive:
        return {}
    best = max(positive.values())
    raw = {uid: math.exp((value - best) / temperature) for uid, value in positive.items()}
    total = math.fsum(raw.values())
    return {uid: value / total for uid, value in raw.items()}


def to_u16(weights: Mapping[int, float]) -> tuple[list[int], list[int]]:
    """Uids and u16 weights for the chain, scaled so the largest weight is 65535.

    Zero, negative and non-finite weights, and those that round to 0, are left out.
    """
    usable = {uid: value for uid, value in sorted(weights.items()) if _positive(value)}
    if not usable:
        return [], []
    top = max(usable.values())
    encoded = {uid: round(value / top * U16_MAX) for uid, value in usable.items()}
    kept = [(uid, value) for uid, value in encoded.items() if value > 0]
    return [uid for uid, _ in kept], [value for _, value in kept]


def _positive(value: float) -> bool:
    return math.isfinite(value) and value > 0
