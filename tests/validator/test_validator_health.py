"""``/health`` tells the truth: ``degraded`` with its reasons, the same on the metrics gauges.

First :func:`validator.health.assess` condition by condition (each fires at its threshold
and not before), then the validator's own ``/health`` + ``/metrics`` app on a real loop and
a fake chain: infrastructure failures, a missing permit, and the start-up sandbox check
forced to fail (the check runs off the event loop and warns once).
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import httpx
import pytest

import neurons.validator as process
import sandbox
import validator.sources as sources
from protocol.metagraph import MetagraphSnapshot
from protocol.outcomes import StepOutcome
from support.health import VALIDATOR, BreakableTasks, validator_loop
from support.keys import MetagraphBuilder, dev_keypair
from validator import health
from validator.health import HealthInputs, assess

OTHER = dev_keypair("dagnet-health-other")
STREAK = health.INFRASTRUCTURE_STREAK


def _snapshot(*, permit: bool = True, registered: bool = True, block: int = 100) -> MetagraphSnapshot:
    builder = MetagraphBuilder(netuid=7, block=block).miner(OTHER)
    if registered:
        builder.neuron(VALIDATOR, stake=1_000.0, validator_permit=permit)
    return builder.build()


def _codes(**inputs) -> set[str]:
    return set(assess(HealthInputs(hotkey=VALIDATOR.ss58_address, **inputs)).codes())


# -- the conditions, one by one -------------------------------------------------------


def test_a_fresh_validator_is_ok() -> None:
    verdict = assess(HealthInputs(hotkey=VALIDATOR.ss58_address))
    assert verdict.status == "ok" and verdict.reasons == ()
    assert (
        _codes(
            recent_steps=[StepOutcome.SETTLED] * 10,
            snapshot=_snapshot(),
            metagraph_age_s=3.0,
            tempo=10,
            last_weights_block=95,
            first_block=50,
        )
        == set()
    )


def test_infrastructure_failures_degrade_only_as_an_unbroken_streak() -> None:
    assert _codes(recent_steps=[StepOutcome.INFRASTRUCTURE] * (STREAK - 1)) == set()
    assert _codes(recent_steps=[StepOutcome.SETTLED] + [StepOutcome.INFRASTRUCTURE] * STREAK) == {health.INFRASTRUCTURE}
    assert _codes(recent_steps=[StepOutcome.INFRASTRUCTURE] * STREAK + [StepOutcome.IDLE]) == set()
    assert _codes(recent_steps=[StepOutcome.INFRASTRUCTURE] * STREAK + [StepOutcome.SETTLED]) == set()
    mixed = (
        [StepOutcome.INFRASTRUCTURE] * (STREAK - 1) + [StepOutcome.IDLE] + [StepOutcome.INFRASTRUCTURE] * (STREAK - 1)
    )
    assert _codes(recent_steps=mixed) == set()


def test_no_permit_and_not_registered_both_degrade() -> None:
    assert _codes(snapshot=_snapshot(permit=True)) == set()
    no_permit = assess(HealthInputs(hotkey=VALIDATOR.ss58_address, snapshot=_snapshot(permit=False)))
    assert no_permit.codes() == {health.NO_PERMIT}
    assert "has no validator permit on netuid 7" in no_permit.reasons[0].message
    unregistered = assess(HealthInputs(hotkey=VALIDATOR.ss58_address, snapshot=_snapshot(registered=False)))
    assert unregistered.codes() == {health.NO_PERMIT}
    assert "is not registered on netuid 7" in unregistered.reasons[0].message
    assert _codes(snapshot=None) == set()  # nothing read yet: the chain reason covers it


def test_weights_are_stale_after_two_tempos_counted_from_the_last_set_or_the_start() -> None:
    tempo, last = 10, 100
    assert _codes(snapshot=_snapshot(block=last + 2 * tempo), tempo=tempo, last_weights_block=last) == set()
    stale = assess(
        HealthInputs(
            hotkey=VALIDATOR.ss58_address,
            snapshot=_snapshot(block=last + 2 * tempo + 1),
            tempo=tempo,
            last_weights_block=last,
        )
    )
    assert stale.codes() == {health.WEIGHTS_STALE}
    assert "21 blocks (last at block 100)" in stale.reasons[0].message
    # never set: the clock starts at the first block this process saw, not at block 0
    assert _codes(snapshot=_snapshot(block=5_000), tempo=tempo, first_block=4_990) == set()
    never = assess(
        HealthInputs(hotkey=VALIDATOR.ss58_address, snapshot=_snapshot(block=5_021), tempo=tempo, first_block=5_000)
    )
    assert (
        never.codes() == {health.WEIGHTS_STALE}
        and "since this validator started at block 5000" in never.reasons[0].message
    )
    assert _codes(snapshot=_snapshot(block=5_021), tempo=None, first_block=5_000) == set()  # tempo unknown yet


def test_a_chain_not_read_for_minutes_is_unreachable() -> None:
    stale = health.METAGRAPH_STALE_S
    assert _codes(metagraph_age_s=stale - 1) == set()
    assert _codes(metagraph_age_s=stale + 1) == {health.CHAIN_UNREACHABLE}
    assert _codes(metagraph_age_s=None, uptime_s=stale - 1) == set()
    assert _codes(metagraph_age_s=None, uptime_s=stale + 1) == {health.CHAIN_UNREACHABLE}


def test_an_unavailable_sandbox_degrades_and_every_reason_is_reported_together() -> None:
    verdict = assess(
        HealthInputs(
            hotkey=VALIDATOR.ss58_address,
            recent_steps=[StepOutcome.INFRASTRUCTURE] * STREAK,
            snapshot=_snapshot(permit=False),
            metagraph_age_s=1_000.0,
            tempo=10,
            last_weights_block=10,
            sandbox_problem="isolation here is rlimits",
            state_problem="the state file v.sqlite cannot be written: database or disk is full",
        )
    )
    assert verdict.status == "degraded"
    assert [r.code for r in verdict.reasons] == list(health.REASONS)
    assert verdict.reasons[-2].message == "sandbox unavailable: isolation here is rlimits"
    assert verdict.reasons[-1].message.startswith("the state file v.sqlite cannot be written: database or disk is full")


# -- the validator's /health and /metrics -----------------------------------------------


async def _get(app, path: str) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://validator") as client:
        return await client.get(path)


def _gauges(text: str) -> dict[str, float]:
    prefix = 'dagnet_validator_degraded{reason="'
    return {
        line[len(prefix) :].split('"')[0]: float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith(prefix)
    }


async def _ok_sandbox() -> str | None:
    return None


async def test_health_and_gauges_follow_the_loop(tmp_path: Path) -> None:
    tasks = BreakableTasks(())
    async with validator_loop(tmp_path, _snapshot(), tasks) as (loop, chain, metrics):
        app = process.health_app(loop, metrics, asyncio.ensure_future(_ok_sandbox()))
        tasks.broken = True
        for _ in range(STREAK - 1):
            await loop.step(chain.advance())
        assert (await _get(app, "/health")).json()["status"] == "ok"
        await loop.step(chain.advance())
        body = (await _get(app, "/health")).json()
        assert body["status"] == "degraded" and len(body["reasons"]) == 1
        assert body["reasons"][0].startswith(f"the last {STREAK} steps failed for infrastructure reasons")
        gauges = _gauges((await _get(app, "/metrics")).text)
        assert set(gauges) == set(health.REASONS) and gauges[health.INFRASTRUCTURE] == 1.0
        assert sum(gauges.values()) == 1.0

        tasks.broken = False
        await loop.step(chain.advance())
        body = (await _get(app, "/health")).json()
        assert body["status"] == "ok" and body["reasons"] == [] and body["hotkey"] == VALIDATOR.ss58_address
        assert set(_gauges((await _get(app, "/metrics")).text).values()) == {0.0}


async def test_a_subnet_missing_on_the_chain_is_named_in_health(tmp_path: Path) -> None:
    import dataclasses

    from chain.base import ChainError

    async with validator_loop(tmp_path, _snapshot()) as (loop, chain, metrics):

        async def missing(block=None):
            raise ChainError("read the metagraph: subnet 5 does not exist on embedded:dev.sqlite")

        chain.metagraph = missing
        await loop.step(chain.head)
        inputs = HealthInputs.of(loop, metrics, None)
    (reason,) = health.assess(dataclasses.replace(inputs, uptime_s=health.METAGRAPH_STALE_S + 1)).reasons
    assert reason.code == health.CHAIN_UNREACHABLE
    assert reason.message.endswith(": read the metagraph: subnet 5 does not exist on embedded:dev.sqlite"), reason


async def test_a_validator_without_a_permit_says_so(tmp_path: Path) -> None:
    async with validator_loop(tmp_path, _snapshot(permit=False)) as (loop, chain, metrics):
        app = process.health_app(loop, metrics)
        await loop.step(chain.head)
        body = (await _get(app, "/health")).json()
        assert body["status"] == "degraded" and "has no validator permit" in body["reasons"][0]
        assert _gauges((await _get(app, "/metrics")).text)[health.NO_PERMIT] == 1.0


@pytest.mark.parametrize("failure", ["no bwrap", "bwrap cannot start"])
async def test_an_unavailable_sandbox_is_found_at_start_and_makes_health_degraded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, failure: str
) -> None:
    if failure == "no bwrap":
        monkeypatch.setattr(sources, "isolation_available", lambda: "rlimits")
    else:

        def refuse(*args, **kwargs):
            raise sandbox.SandboxUnavailable("bwrap: No permissions to create a new namespace")

        monkeypatch.setattr(sources, "isolation_available", lambda: sandbox.PRIVATE_ISOLATION)
        monkeypatch.setattr(sources, "run_python", refuse)
    caplog.set_level(logging.WARNING, logger="dagnet.validator")
    async with validator_loop(tmp_path, _snapshot()) as (loop, chain, metrics):
        check = sources.start_sandbox_check()
        app = process.health_app(loop, metrics, check)
        problem = await check
        await loop.step(chain.head)
        body = (await _get(app, "/health")).json()
        metrics_text = (await _get(app, "/metrics")).text
    assert problem is not None and body["status"] == "degraded"
    assert [reason.split(":")[0] for reason in body["reasons"]] == ["sandbox unavailable"]
    assert ("rlimits" if failure == "no bwrap" else "No permissions") in body["reasons"][0]
    assert _gauges(metrics_text)[health.SANDBOX_UNAVAILABLE] == 1.0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name == "dagnet.validator"]
    assert len(warnings) == 1 and warnings[0].startswith(sources.SANDBOX_WARNING)


async def test_the_sandbox_check_runs_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """A check that takes 0.6 s (a slow bwrap probe) leaves the loop ticking meanwhile."""

    def slow_isolation() -> str:
        time.sleep(0.6)
        return "none"

    monkeypatch.setattr(sources, "isolation_available", slow_isolation)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    started = time.monotonic()
    check = sources.start_sandbox_check()
    assert time.monotonic() - started < 0.1  # starting it returns at once
    assert await check == "isolation here is none, and code is judged only under bwrap"
    ticker.cancel()
    assert ticks >= 20  # ~60 at 10 ms; a blocked loop would give 0 or 1


@pytest.mark.skipif(sandbox.isolation_available() != sandbox.PRIVATE_ISOLATION, reason="needs bwrap on this machine")
def test_the_sandbox_check_passes_where_bwrap_works() -> None:
    assert sources.sandbox_problem() is None
