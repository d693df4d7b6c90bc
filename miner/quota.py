"""Each validator's share of the miner's planning: concurrency and CPU, per hotkey.

Planning is the miner's costly work (CPU in its planning processes,
:mod:`miner.workers`). So that one permitted validator cannot starve another,
:class:`PlanningQuota` gives each caller hotkey

- a share of the planning processes (:class:`~miner.fairshare.FairShare`):
  ``per_validator`` of its queries plan at once, ``queue_per_validator`` more wait, and
  any beyond are refused at once (429 ``planner_busy``); waiting validators are served in
  turn, and the last free process is kept for a validator that asks now and then;
- a CPU allowance: a bucket of CPU seconds refilled at ``cpu_per_s`` up to
  ``cpu_burst_s``; each query is charged the CPU its planning process spent on it (the
  deadline when it was killed there). A query is admitted only while the bucket is
  above zero; else 429 ``planning_allowance`` with the seconds until it is.

So one validator, or two, flooding the miner hold at most all processes but one, and a
validator that asks now and then finds that one free. Callers reach this only
after the blacklist, so the tables hold at most the metagraph's hotkeys (without auth,
every caller is one key).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from .fairshare import Busy, FairShare

__all__ = ["PlanningQuota", "QuotaExceeded"]


class QuotaExceeded(Exception):
    """A query refused for its caller's quota: ``reason`` for programs, ``retry_after_s``."""

    def __init__(self, reason: str, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.reason = reason
        self.retry_after_s = retry_after_s


@dataclass
class _Caller:
    cpu_s: float
    refilled_at: float


class PlanningQuota:
    """Per-hotkey shares of ``slots`` planning processes and CPU allowance (see the module)."""

    def __init__(
        self,
        *,
        slots: int,
        per_validator: int,
        queue_per_validator: int,
        cpu_per_s: float,
        cpu_burst_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.share = FairShare(slots, per_validator=per_validator, queue_per_validator=queue_per_validator)
        self._rate = cpu_per_s
        self._burst = cpu_burst_s
        self._clock = clock
        self._callers: dict[str, _Caller] = {}

    @contextlib.asynccontextmanager
    async def admit(self, hotkey: str) -> AsyncIterator[Callable[[float], None]]:
        """Hold a planning process for ``hotkey``'s query; yields ``charge(cpu_s)``. Raises :class:`QuotaExceeded`."""
        caller = self._caller(hotkey)
        self._check_allowance(caller)
        try:
            await self.share.acquire(hotkey)
        except Busy as busy:
            raise QuotaExceeded("planner_busy", str(busy), 1.0) from None
        try:
            self._check_allowance(caller)
            yield lambda cpu_s: self._charge(caller, cpu_s)
        finally:
            self.share.release(hotkey)

    def allowance(self, hotkey: str) -> float:
        """The CPU seconds ``hotkey`` has left (negative: in debt)."""
        caller = self._caller(hotkey)
        self._refill(caller)
        return caller.cpu_s

    def _caller(self, hotkey: str) -> _Caller:
        caller = self._callers.get(hotkey)
        if caller is None:
            caller = self._callers[hotkey] = _Caller(self._burst, self._clock())
        return caller

    def _refill(self, caller: _Caller) -> None:
        now = self._clock()
        caller.cpu_s = min(self._burst, caller.cpu_s + (now - caller.refilled_at) * self._rate)
        caller.refilled_at = now

    def _check_allowance(self, caller: _Caller) -> None:
        self._refill(caller)
        if caller.cpu_s <= 0.0:
            wait_s = max(1.0, float(math.ceil(-caller.cpu_s / self._rate)))
            raise QuotaExceeded(
                "planning_allowance",
                f"this validator has used its planning CPU allowance ({self._rate:g} CPU-s per s, "
                f"{self._burst:g} s at most); retry in {wait_s:g}s",
                wait_s,
            )

    def _charge(self, caller: _Caller, cpu_s: float) -> None:
        self._refill(caller)
        caller.cpu_s -= max(0.0, cpu_s)
