"""Scoring an attacker's plan as a validator scores it, many at once (the attack suites)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from neurons.localrun import run_document
from protocol.documents import PlanDocument
from protocol.plan import WorkflowPlan
from protocol.task import Task

T = TypeVar("T")


async def scored_run(plan: WorkflowPlan, task: Task, estimate: float = 0.0) -> dict[str, Any]:
    """The run report of ``plan`` on ``task``'s instance: the validator's owned execution, scored."""
    return await run_document(PlanDocument(plan, estimate, "synapse"), task=task)


async def gather(coroutines: list[Awaitable[T]], width: int = 8) -> list[T]:
    """The coroutines' results in order, at most ``width`` running at a time."""
    gate = asyncio.Semaphore(width)

    async def one(coroutine: Awaitable[T]) -> T:
        async with gate:
            return await coroutine

    return await asyncio.gather(*(one(c) for c in coroutines))
