"""Rolling score windows: the last ``size`` scores of each miner uid, equal weight (docs/scoring.md)."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from typing import Any


class RollingWindow:
    """Per-uid windows of the most recent scores; the oldest falls out at ``size + 1``.

    Scores are stored clamped to [0, 1] (non-finite → 0). Means use ``math.fsum``,
    so they do not depend on summation order. ``to_dict``/``from_dict`` give the
    plain-JSON form the state store persists.
    """

    def __init__(self, size: int = 100) -> None:
        if not isinstance(size, int) or size <= 0:
            raise ValueError(f"window size must be a positive int, got {size!r}")
        self.size = size
        self._scores: dict[int, deque[float]] = {}

    def add(self, uid: int, score: float) -> None:
        window = self._scores.get(uid)
        if window is None:
            window = self._scores[uid] = deque(maxlen=self.size)
        window.append(_clean(score))

    def mean(self, uid: int) -> float:
        """The window's mean; 0.0 for a uid with no scores."""
        window = self._scores.get(uid)
        return math.fsum(window) / len(window) if window else 0.0

    def scores(self, uid: int) -> list[float]:
        """``uid``'s scores, oldest first (none for a uid with no scores)."""
        return list(self._scores.get(uid, ()))

    def count(self, uid: int) -> int:
        """Scores held for ``uid`` (at most ``size``)."""
        return len(self._scores.get(uid, ()))

    def means(self) -> dict[int, float]:
        return {uid: self.mean(uid) for uid in sorted(self._scores)}

    def reset(self, uid: int) -> None:
        """Forget a uid, e.g. when a new hotkey registers on it."""
        self._scores.pop(uid, None)

    def uids(self) -> list[int]:
        return sorted(self._scores)

    def to_dict(self) -> dict[str, Any]:
        return {"size": self.size, "scores": {str(uid): list(self._scores[uid]) for uid in self.uids()}}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RollingWindow:
        """Rebuild from :meth:`to_dict` output; raises ``ValueError`` on a malformed dict.
        A stored list longer than ``size`` keeps its newest scores."""
        try:
            window = cls(data["size"])
            stored = data["scores"]
            for key, scores in stored.items():
                uid = int(key)
                if uid < 0 or not isinstance(scores, list):
                    raise ValueError(f"bad window for uid {key!r}")
                for score in scores:
                    window.add(uid, float(score))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed rolling window: {exc!r}") from None
        return window


def _clean(score: float) -> float:
    score = float(score)
    if not math.isfinite(score):
        return 0.0
    return min(max(score, 0.0), 1.0)
