"""The token bucket and the stake-ordered admission gate, driven directly."""

from __future__ import annotations

import asyncio

import pytest

from miner.limits import TokenBuckets
from miner.priority import StakeGate


def test_bucket_grants_burst_then_refuses_with_the_wait() -> None:
    buckets = TokenBuckets(per_second=2.0, burst=3)
    assert [buckets.take("a", 0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("a", 0.0) == pytest.approx(0.5)
    assert buckets.take("b", 0.0) == 0.0  # buckets are per key


def test_bucket_refills_at_its_rate_up_to_burst() -> None:
    buckets = TokenBuckets(per_second=2.0, burst=2)
    buckets.take("a", 0.0)
    buckets.take("a", 0.0)
    assert buckets.take("a", 0.5) == 0.0  # one token back after 0.5 s
    assert buckets.take("a", 0.5) > 0.0
    assert [buckets.take("a", 100.0) for _ in range(3)][:2] == [0.0, 0.0]  # capped at burst


async def _until(condition) -> None:
    """Let the loop run the other tasks until ``condition()`` holds (no wall-clock wait)."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


async def test_gate_admits_the_highest_stake_first() -> None:
    gate = StakeGate(1)
    await gate.acquire(0.0)  # the only slot is busy
    admitted: list[str] = []

    async def request(name: str, stake: float) -> None:
        await gate.acquire(stake)
        admitted.append(name)
        gate.release()

    tasks = [asyncio.create_task(request(n, s)) for n, s in [("low", 1.0), ("high", 500.0), ("mid", 20.0)]]
    await _until(lambda: gate.waiting == 3)
    gate.release()
    await asyncio.gather(*tasks)
    assert admitted == ["high", "mid", "low"]


async def test_gate_bounds_concurrency() -> None:
    gate = StakeGate(2)
    running = peak = 0
    release = asyncio.Event()

    async def request() -> None:
        nonlocal running, peak
        await gate.acquire(1.0)
        running += 1
        peak = max(peak, running)
        await release.wait()
        running -= 1
        gate.release()

    tasks = [asyncio.create_task(request()) for _ in range(5)]
    await _until(lambda: gate.waiting == 3)
    release.set()
    await asyncio.gather(*tasks)
    assert peak == 2


async def test_cancelled_waiter_does_not_leak_a_slot() -> None:
    gate = StakeGate(1)
    await gate.acquire(0.0)
    waiter = asyncio.create_task(gate.acquire(100.0))
    await _until(lambda: gate.waiting == 1)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    gate.release()
    await asyncio.wait_for(gate.acquire(0.0), timeout=1)  # the slot came back
