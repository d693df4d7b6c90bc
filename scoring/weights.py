"""From per-miner scores to on-chain weights: warm-up, capped normalisation, u16 encoding."""

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


def normalize_weights(scores: Mapping[int, float], cap: float = 0.15) -> dict[int, float]:
    """Weights proportional to the scores, summing to 1, none above ``cap``.

    Water-filling: miners whose share would pass the cap get exactly the cap and
    the rest of the mass is shared proportionally among the others, repeated until
    no share passes it. Negative, NaN and infinite scores count as 0 and miners
    at 0 get no weight. Edge cases:

    - no positive score (or no scores): ``{}`` — there is nothing to reward, and
      the caller decides what to put on chain;
    - fewer positive miners than ``1 / cap`` (the cap cannot hold, e.g. one miner
      → 1.0): every positive miner ends up capped, so each gets ``1 / n``.
    """
    if not 0 < cap <= 1:
        raise ValueError(f"cap must be in (0, 1], got {cap}")
    open_ = {uid: value for uid, value in sorted(scores.items()) if _positive(value)}
    if not open_:
        return {}
    if len(open_) * cap <= 1:
        return {uid: 1.0 / len(open_) for uid in open_}
    weights: dict[int, float] = {}
    mass = 1.0
    while True:
        total = math.fsum(open_.values())
        over = [uid for uid, value in open_.items() if mass * value / total > cap]
        if not over:
            weights.update({uid: mass * value / total for uid, value in open_.items()})
            return dict(sorted(weights.items()))
        for uid in over:  # above the cap now stays above it: the level only rises
            weights[uid] = cap
            del open_[uid]
        mass -= cap * len(over)


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
