"""Each validator's share of the miner's planning: concurrency and CPU, per hotkey.

Planning is the miner's costly work (CPU in its planning processes,
:mod:`miner.workers`). So that one permitted validator cannot starve another,
:class:`PlanningQuota` gives each caller hotkey

- ``per_validator`` slots: that many of its queries plan at once, ``queue_per_validator``
  more wait for a slot, and any beyond are refused at once (429 ``planner_busy``);
- a CPU allowance: a bucket of CPU seconds refilled at ``cpu_per_s`` up to
  ``cpu_burst_s``; each query is charged the CPU its planning process spent on it (the
  deadline when it was killed there). A query is admitted only while the bucket is
  above zero; else 429 ``planning_allowance`` with the seconds until it is.

With more planning processes (``planner.workers``, default 2) than one validator's
slots (``per_validator``, default 1), a validator that floods the miner always leaves
a process free for the others. Callers reach this only after the blacklist, so the
table holds at most the metagraph's hotkeys (without auth, every caller is one key).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

__all__ = ["PlanningQuota", "QuotaExceeded"]


class QuotaExceeded(Exception):
    """A query refused for its caller's quota: ``reason`` for programs, ``retry_after_s``."""

    def __init__(self, reason: str, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.reason = reason
        self.retry_after_s = retry_after_s


@dataclass
class _Caller:
    slots: asyncio.Semaphore
    cpu_s: float
    refilled_at: float
    waiting: int = 0


class PlanningQuota:
    """Per-hotkey planning slots and CPU allowance (see the module)."""

    def __init__(
        self,
        *,
        per_validator: int,
        queue_per_validator: int,
        cpu_per_s: float,
        cpu_burst_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._per_validator = per_validator
        self._queue = queue_per_validator
        self._rate = cpu_per_s
        self._burst = cpu_burst_s
        self._clock = clock
        self._callers: dict[str, _Caller] = {}

    @contextlib.asynccontextmanager
    async def admit(self, hotkey: str) -> AsyncIterator[Callable[[float], None]]:
        """Hold one of ``hotkey``'s slots; yields ``charge(cpu_s)``. Raises :class:`QuotaExceeded`."""
        caller = self._caller(hotkey)
        self._check_allowance(caller)
        if caller.slots.locked() and caller.waiting >= self._queue:
            raise QuotaExceeded(
                "planner_busy",
                f"this validator already has {self._per_validator} planning quer"
                f"{'y' if self._per_validator == 1 else 'ies'} running and {caller.waiting} waiting",
                1.0,
            )
        caller.waiting += 1
        try:
            await caller.slots.acquire()
        finally:
            caller.waiting -= 1
        try:
            self._check_allowance(caller)
            yield lambda cpu_s: self._charge(caller, cpu_s)
        finally:
            caller.slots.release()

    def allowance(self, hotkey: str) -> float:
        """The CPU seconds ``hotkey`` has left (negative: in debt)."""
        caller = self._caller(hotkey)
        self._refill(caller)
        return caller.cpu_s

    def _caller(self, hotkey: str) -> _Caller:
        caller = self._callers.get(hotkey)
        if caller is None:
            caller = self._callers[hotkey] = _Caller(asyncio.Semaphore(self._per_validator), self._burst, self._clock())
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
