"""The miner logs one INFO line per query: the validator, the task and tier, the outcome
(planned, unplannable and why, refused and why) and the milliseconds it took."""

from __future__ import annotations

import logging
import re

import pytest
from test_miner_routes import PACKAGE

from planners.base import PlanningError
from support.keys import MetagraphBuilder, dev_keypair
from support.miner import FakePlanner, running_miner

VALIDATOR, MINER = dev_keypair("Alice"), dev_keypair("Bob")
SHORT = VALIDATOR.ss58_address[:8] + "…"


class Picky(FakePlanner):
    """Plans every task but the one whose description asks for vision."""

    def plan(self, package):
        if "vision" in package.description:
            raise PlanningError("no subnet of kind 'vision'")
        return super().plan(package)


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "dagnet.miner" and r.levelno == logging.INFO]


async def test_each_query_is_one_line_naming_validator_task_tier_outcome_and_ms(caplog) -> None:
    caplog.set_level(logging.INFO, logger="dagnet.miner")
    outline = PACKAGE.model_copy(update={"hint_tier": "outline"})
    vision = PACKAGE.model_copy(update={"task_id": "task-43", "description": "needs vision"})
    async with running_miner(planner=Picky()) as miner:
        for package in (outline, vision):
            await miner.post("/WorkflowSynapse", package.model_dump(mode="json"))
    planned, unplannable = _lines(caplog)
    assert re.fullmatch(rf"query from {SHORT}: task task-42 \(outline tier\): planned in \d+ ms", planned), planned
    assert re.fullmatch(
        rf"query from {SHORT}: task task-43 \(full tier\): unplannable: cannot plan this task: "
        r"no subnet of kind 'vision' in \d+ ms",
        unplannable,
    ), unplannable


async def test_a_validator_without_a_permit_is_refused_in_one_line_per_query(caplog) -> None:
    caplog.set_level(logging.INFO, logger="dagnet.miner")
    snapshot = MetagraphBuilder(netuid=7).neuron(VALIDATOR, stake=1_000.0).miner(MINER).build()
    async with running_miner(snapshot=snapshot) as miner:
        for _ in range(2):
            response = await miner.post("/WorkflowSynapse", PACKAGE.model_dump(mode="json"))
            assert response.status_code == 403
    assert _lines(caplog) == [f"query from {SHORT}: refused 403 no_validator_permit: uid 0 has no validator permit"] * 2


async def test_unregistered_callers_are_logged_at_most_once_a_minute(caplog) -> None:
    caplog.set_level(logging.INFO, logger="dagnet.miner")
    snapshot = MetagraphBuilder(netuid=7).miner(MINER).build()
    async with running_miner(snapshot=snapshot) as miner:
        for _ in range(3):
            assert (await miner.post("/WorkflowSynapse", PACKAGE.model_dump(mode="json"))).status_code == 403
    (line,) = _lines(caplog)
    assert line.startswith(f"query from {SHORT}: refused 403 unregistered: hotkey {VALIDATOR.ss58_address} is not")
    assert line.endswith("(1 such refusal since the last line)")
