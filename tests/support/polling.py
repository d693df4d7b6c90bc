"""Waiting in tests for something another task or process makes true."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable


async def until(
    condition: Callable[[], bool | Awaitable[bool]], *, timeout_s: float = 60.0, every_s: float = 0.01
) -> None:
    """Ask ``condition()`` (a plain or an async function) every ``every_s`` until it holds;
    fails with ``TimeoutError`` after ``timeout_s``."""
    async with asyncio.timeout(timeout_s):
        while True:
            held = condition()
            if inspect.isawaitable(held):
                held = await held
            if held:
                return
            await asyncio.sleep(every_s)
