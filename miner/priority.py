"""Bounded concurrency where the richest waiting caller goes first.

When every slot is busy, requests wait in a heap ordered by the caller's stake
(highest first, then arrival). A validator with more stake therefore waits
less under load, and the miner never works on more than ``limit`` requests.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

from .asgi import STAKE, ASGIApp, Receive, Scope, Send


class StakeGate:
    """A semaphore whose waiters are woken by stake, not by arrival.

    Invariant: ``_free`` is positive only while no live waiter is queued; a
    released slot is handed straight to the best waiter (its future resolved)
    instead of being returned to ``_free``. Cancelled waiters stay in the heap
    and are skipped when popped.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self._free = limit
        self._waiters: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    @property
    def waiting(self) -> int:
        return sum(1 for *_, fut in self._waiters if not fut.done())

    async def acquire(self, stake: float) -> None:
        if self._free > 0:
            self._free -= 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (-stake, next(self._order), fut))
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # the slot was handed over just as we were cancelled
            raise

    def release(self) -> None:
        while self._waiters:
            *_, fut = heapq.heappop(self._waiters)
            if not fut.done():
                fut.set_result(None)
                return
        self._free += 1


class StakePriorityMiddleware:
    """Admit at most ``max_concurrency`` requests at once, highest stake first.

    Public paths never reach the gate (:class:`miner.asgi.Guarded`), so ``/health``
    answers even under full load.
    Without a blacklist in front (auth off) every caller has stake 0: FIFO.
    """

    def __init__(self, app: ASGIApp, *, max_concurrency: int) -> None:
        self.app = app
        self.gate = StakeGate(max_concurrency)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.gate.acquire(scope.get(STAKE, 0.0))
        try:
            await self.app(scope, receive, send)
        finally:
            self.gate.release()
