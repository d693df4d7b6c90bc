"""A node on ``top_k`` providers (docs/execution.md, routing): combining their outputs into
one, and owned execution's ``top_k``.

:func:`aggregate` is pure, over already-validated :class:`NodeOutput` values in provider
order. Both rules are deterministic, so every validator that received the same outputs in
the same order agrees on the result.

:func:`routed` makes an owned runner honour the task's routing policy: a node whose
subnet's rule asks ``top_k`` providers runs on ``top_k`` of the profile's providers at
once, is charged ``top_k`` times and has their outputs aggregated as the rule says
(what the package prices, :func:`engine.evaluate.expected_prices`, is what it costs).
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace

from protocol.output import NodeOutput
from protocol.runner import Emit, FrameRunner, NodeCall, NodeResult, NodeRunner
from protocol.synapse import Aggregation, RoutingRule

__all__ = ["UNVERIFIABLE", "aggregate", "combine", "deterministic", "routed"]

UNVERIFIABLE = frozenset({"llm"})
"""Actions whose answer is not a function of their params (a model's sampling): two
providers may answer them differently, and nobody can re-run them to check."""


def deterministic(action: str) -> bool:
    """Whether every honest provider gives ``action`` on the same params the same answer."""
    return action not in UNVERIFIABLE


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


class _Routed:
    """``runner`` with each node run on its subnet's ``top_k`` providers (see the module).

    The providers owned execution plays are the profile's, all alike: on a deterministic
    action they give one answer, at one latency, failing the same attempts, so one run
    stands for ``top_k`` and is charged ``top_k`` times. An ``llm`` node runs ``top_k``
    times at once (a model may answer each differently) and its answers are aggregated.
    """

    __slots__ = ("_runner", "_route")

    def __init__(self, runner: NodeRunner, route: Callable[[str], RoutingRule]) -> None:
        self._runner = runner
        self._route = route

    async def run(self, call: NodeCall) -> NodeResult:
        rule = self._route(call.subnet)
        if rule.top_k == 1:
            return await self._runner.run(call)
        if deterministic(call.action):
            result = await self._runner.run(call)
            return replace(result, cost_tao=result.cost_tao * rule.top_k)
        results = await asyncio.gather(*(self._runner.run(call) for _ in range(rule.top_k)))
        return combine(results, rule.aggregation)

    async def run_frames(self, call: NodeCall, emit: Emit) -> NodeResult:
        """A generator's frames come from one provider (they cannot be voted on one by
        one), charged as the ``top_k`` the package priced."""
        assert isinstance(self._runner, FrameRunner)
        result = await self._runner.run_frames(call, emit)
        return replace(result, cost_tao=result.cost_tao * self._route(call.subnet).top_k)


class _PlainRouted:
    """:class:`_Routed` without ``run_frames``, for runners that have none."""

    __slots__ = ("_inner",)

    def __init__(self, inner: _Routed) -> None:
        self._inner = inner

    async def run(self, call: NodeCall) -> NodeResult:
        return await self._inner.run(call)


def routed(runner: NodeRunner, route: Callable[[str], RoutingRule]) -> NodeRunner:
    """``runner`` under the routing rules ``route`` gives (a task's ``route``); a frame
    runner stays a frame runner."""
    wrapped = _Routed(runner, route)
    return wrapped if isinstance(runner, FrameRunner) else _PlainRouted(wrapped)


def combine(results: Sequence[NodeResult], aggregation: Aggregation, *, failed: str | None = None) -> NodeResult:
    """One node result from its providers' ``results``: their outputs aggregated, their
    costs and transport retries summed. ``failed`` is the error when no provider gave an
    output (default: the first provider's error)."""
    cost = sum(result.cost_tao for result in results)
    retries = sum(result.unplanned_retries for result in results)
    outputs = [result.output for result in results if result.output is not None]
    if not outputs:
        return NodeResult(None, cost_tao=cost, error=failed or results[0].error, unplanned_retries=retries)
    combined = aggregate(outputs, aggregation)
    error = None if combined is not None else f"no numeric output to aggregate ({aggregation})"
    return NodeResult(combined, cost_tao=cost, error=error, unplanned_retries=retries)
