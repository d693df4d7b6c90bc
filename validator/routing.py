"""Combining the outputs of several providers of one node into one (docs/execution.md, routing).

Pure functions over already-validated :class:`NodeOutput` values, in provider
order. Both rules are deterministic, so every validator that received the same
outputs in the same order agrees on the result.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from protocol.output import NodeOutput
from protocol.synapse import Aggregation


def aggregate(outputs: Sequence[NodeOutput], aggregation: Aggregation) -> NodeOutput | None:
    """The combined output, or ``None`` when the rule cannot produce one.

    - ``majority_vote``: the output whose ``text`` is most common; on a tie, the
      first of the tied texts in provider order. That provider's whole output
      (artifacts included) is returned.
    - ``median_logit``: the median of the texts that parse as finite numbers
      (others are ignored; for an even count, the mean of the middle two), as a
      text-only output. ``None`` when no text is numeric.
    """
    if not outputs:
        return None
    if aggregation == "majority_vote":
        return _majority(outputs)
    if aggregation == "median_logit":
        return _median(outputs)
    raise ValueError(f"unknown aggregation {aggregation!r}")


def _majority(outputs: Sequence[NodeOutput]) -> NodeOutput:
    counts = Counter(output.text for output in outputs)
    best = max(counts.values())
    # ``outputs`` is scanned in provider order, so the first text reaching the
    # top count wins a tie.
    return next(output for output in outputs if counts[output.text] == best)


def _median(outputs: Sequence[NodeOutput]) -> NodeOutput | None:
    values = sorted(v for v in map(_number, outputs) if v is not None)
    if not values:
        return None
    mid = len(values) // 2
    median = values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2
    return NodeOutput(text=_format(median))


def _number(output: NodeOutput) -> float | None:
    try:
        value = float(output.text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _format(value: float) -> str:
    """Integers without ``.0`` (as the calculator prints them), else ``repr``."""
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)
