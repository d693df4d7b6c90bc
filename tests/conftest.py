"""Shared pytest fixtures. Each helper's fixtures carry its area's prefix (``miner_``...)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from support.miner import MinerUnderTest, running_miner
from support.prometheus import prometheus  # noqa: F401  (a fixture, offered to every test)


@pytest.fixture
async def miner_server() -> AsyncIterator[MinerUnderTest]:
    """A miner (//Bob) on a loopback port; validator //Alice is registered with stake."""
    async with running_miner() as miner:
        yield miner
