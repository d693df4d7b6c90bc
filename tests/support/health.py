"""A validator loop on a fake chain, for tests of its ``/health`` and ``/metrics``: real
:class:`~validator.loop.ValidatorLoop`, state file and metrics; no miners, no tasks."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from protocol.metagraph import MetagraphSnapshot
from protocol.task import Task
from subnets.owned import owned_runner
from support.fakechain import FakeChain
from support.keys import dev_keypair
from validator.client import MinerClient
from validator.loop import ValidatorLoop
from validator.prometheus import ValidatorMetrics
from validator.sampling import FixedTasks
from validator.state import ValidatorState

VALIDATOR = dev_keypair("Alice")


class BreakableTasks(FixedTasks):
    """No tasks; ``broken`` makes reading them fail, a fault of the validator's own, not a miner's."""

    broken = False

    def tasks(self) -> Sequence[Task]:
        if self.broken:
            raise RuntimeError("the task store cannot be read")
        return super().tasks()


@contextlib.asynccontextmanager
async def validator_loop(
    tmp_path: Path, snapshot: MetagraphSnapshot, tasks: FixedTasks | None = None
) -> AsyncIterator[tuple[ValidatorLoop, FakeChain, ValidatorMetrics]]:
    """The loop of :data:`VALIDATOR` on a fake chain showing ``snapshot``."""
    chain = FakeChain(hotkey=VALIDATOR.ss58_address, snapshot=snapshot)
    state = ValidatorState(tmp_path / "validator.sqlite")
    metrics = ValidatorMetrics()
    try:
        async with MinerClient(VALIDATOR) as client:
            loop = ValidatorLoop(
                chain, state, client, tasks or FixedTasks(()), owned_runner=owned_runner, metrics=metrics
            )
            yield loop, chain, metrics
    finally:
        state.close()
