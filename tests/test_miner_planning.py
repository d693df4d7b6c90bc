"""Planning is supervised and shared fairly (docs/hardening.md, "The miner's planning").

A planner that spins is killed at the deadline, one that exits costs its query, and one
validator flooding the miner with packages that make the planner spin cannot make
another validator's queries time out.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from miner.config import MinerSettings
from miner.metagraph import snapshot_to_dict
from miner.quota import PlanningQuota, QuotaExceeded
from protocol.synapse import TaskPackage
from support.keys import MetagraphBuilder, dev_keypair, signed_headers
from support.miner import running_miner
from support.planners import DOOMED, BurnsCpu, SpinsOnDoomed

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = TaskPackage(
    task_id="task-7",
    task_type="rag",
    description="say hello",
    constraints={"max_budget_tao": 1.0, "max_latency_seconds": 10.0},
    available_tools={"sn7": {"type": "text", "avg_cost": 0.001, "avg_latency": 0.0}},
)
VALIDATOR_QUERY_TIMEOUT_S = 8.0
"""The validator's own timeout on a query (``ClientConfig.timeout_s``): past it, a query has timed out."""


HONEST_QUERIES = 8


def _package(task_id: str) -> dict:
    return PACKAGE.model_copy(update={"task_id": task_id}).model_dump(mode="json")


def _gone(pid: int, within_s: float = 10.0) -> bool:
    """Whether process ``pid`` has ended (or is a zombie awaiting its reaper) within ``within_s``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


async def test_a_spinning_planner_is_stopped_at_the_deadline() -> None:
    settings = MinerSettings(port=0, planner={"timeout_s": 0.5, "workers": 1})
    async with running_miner(planner=SpinsOnDoomed(), settings=settings) as miner:
        assert (await miner.post("/WorkflowSynapse", _package("warm"))).status_code == 200
        [spinning] = miner.app.state.planning.pids()
        failed = await miner.post("/WorkflowSynapse", _package(DOOMED))
        served = await miner.post("/WorkflowSynapse", _package("after"))
        [replacement] = miner.app.state.planning.pids()
        health = (await miner.get("/health")).json()
    assert failed.status_code == 503
    assert failed.json() == {"error": "the planner did not answer within 0.5s", "reason": "planner_timeout"}
    assert served.status_code == 200, served.text
    assert _gone(spinning) and replacement != spinning
    assert [t.name for t in threading.enumerate() if t.name == "dagnet-planner"] == []  # no thread left spinning
    assert health["planner"]["restarts"] == 1


async def test_a_validator_over_its_cpu_allowance_is_refused_and_another_is_not() -> None:
    alice, charlie, bob = dev_keypair("Alice"), dev_keypair("Charlie"), dev_keypair("Bob")
    snapshot = MetagraphBuilder(netuid=7).validator(alice).validator(charlie).miner(bob).build()
    settings = MinerSettings(port=0, planner={"cpu_burst_s": 0.01, "cpu_per_s": 0.001})
    async with running_miner(planner=BurnsCpu(0.05), settings=settings, snapshot=snapshot) as miner:
        first = await miner.post("/WorkflowSynapse", _package("one"))
        second = await miner.post("/WorkflowSynapse", _package("two"))
        other = await miner.post("/WorkflowSynapse", _package("three"), signer=charlie)
    assert first.status_code == 200 and other.status_code == 200
    assert second.status_code == 429 and second.json()["reason"] == "planning_allowance"
    assert int(second.headers["retry-after"]) >= 40  # 0.04+ CPU-s of debt at 0.001 CPU-s per s


@pytest.mark.e2e  # a flood of 80 queries for 4 s, each planner killed at its 2 s deadline and forked anew
async def test_a_flooding_validator_does_not_starve_another() -> None:
    """//Alice sends 20 packages a second that make the planner spin to its deadline;
    every query of //Charlie, sent meanwhile, is answered 200 before a validator's timeout."""
    alice, charlie, bob = dev_keypair("Alice"), dev_keypair("Charlie"), dev_keypair("Bob")
    snapshot = MetagraphBuilder(netuid=7).validator(alice).validator(charlie).miner(bob).build()
    settings = MinerSettings(port=0, planner={"timeout_s": 2.0})
    async with running_miner(planner=SpinsOnDoomed(), settings=settings, snapshot=snapshot) as miner:
        await asyncio.to_thread(miner.app.state.planning.warm)  # as a served miner does at start

        async def flood() -> list[int]:
            sent = []
            for i in range(80):
                sent.append(asyncio.ensure_future(miner.post("/WorkflowSynapse", _package(f"{DOOMED}-{i}"))))
                await asyncio.sleep(0.05)
            return [r.status_code for r in await asyncio.gather(*sent, return_exceptions=True)
                    if isinstance(r, httpx.Response)]

        async def honest() -> list[tuple[int, float]]:
            answers = []
            await asyncio.sleep(0.5)  # the flood is under way
            for i in range(HONEST_QUERIES):
                started = time.monotonic()
                try:
                    async with asyncio.timeout(VALIDATOR_QUERY_TIMEOUT_S):
                        response = await miner.post("/WorkflowSynapse", _package(f"honest-{i}"), signer=charlie)
                    answers.append((response.status_code, time.monotonic() - started))
                except (TimeoutError, httpx.HTTPError):  # timed out, or the miner stopped answering
                    answers.append((0, time.monotonic() - started))
            return answers

        flooded, answered = await asyncio.gather(flood(), honest())
    print(f"\nflood: alice {sorted(set(flooded))}, charlie {answered}")
    assert [status for status, _ in answered] == [200] * HONEST_QUERIES
    assert 429 in flooded  # alice's excess was refused at once, not queued


def test_quota_slots_are_per_validator() -> None:
    quota = PlanningQuota(per_validator=1, queue_per_validator=0, cpu_per_s=1.0, cpu_burst_s=10.0)

    async def scenario() -> None:
        async with quota.admit("alice"):
            with pytest.raises(QuotaExceeded, match="already has 1 planning query running") as busy:
                async with quota.admit("alice"):
                    pass
            assert busy.value.reason == "planner_busy"
            async with quota.admit("charlie"):
                pass

    asyncio.run(scenario())


def test_quota_cpu_allowance_refills_with_time() -> None:
    now = [0.0]
    quota = PlanningQuota(per_validator=1, queue_per_validator=0, cpu_per_s=0.5, cpu_burst_s=2.0, clock=lambda: now[0])

    async def admitted(hotkey: str, charge_s: float = 0.0) -> None:
        async with quota.admit(hotkey) as charge:
            charge(charge_s)

    async def scenario() -> None:
        await admitted("alice", 3.0)  # 2 banked, 3 spent: 1 in debt
        with pytest.raises(QuotaExceeded) as spent:
            await admitted("alice")
        assert spent.value.reason == "planning_allowance" and spent.value.retry_after_s == 2.0
        await admitted("charlie")
        now[0] = 2.5  # 1.25 CPU-s refilled
        await admitted("alice")
        assert quota.allowance("alice") == pytest.approx(0.25)

    asyncio.run(scenario())


@pytest.mark.e2e
async def test_a_planner_that_exits_costs_its_query_not_the_miner(tmp_path: Path) -> None:
    validator, miner_key = dev_keypair("Alice"), dev_keypair("Bob")
    metagraph = tmp_path / "mg.json"
    metagraph.write_text(json.dumps(snapshot_to_dict(MetagraphBuilder(netuid=1).validator(validator).miner(miner_key).build())))
    proc = subprocess.Popen(
        [sys.executable, "-m", "neurons.miner", "--dev-key", "//Bob", "--metagraph-file", str(metagraph),
         "--port", "0", "--planner", "support.planners:ExitsOnDoomed", "--log-level", "warning"],
        cwd=ROOT, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "tests")},
    )
    try:
        line = proc.stderr.readline()
        assert "listening on" in line, line
        url = line.split("listening on ")[1].split()[0]
        answers = []
        async with httpx.AsyncClient(timeout=60) as client:
            for task_id in (DOOMED, "after", DOOMED, "again"):
                body = json.dumps(_package(task_id)).encode()
                headers = signed_headers(validator, miner_key, "/WorkflowSynapse", body)
                answers.append(await client.post(url + "/WorkflowSynapse", content=body, headers=headers))
            health = await client.get(url + "/health")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert [r.status_code for r in answers] == [500, 200, 500, 200], [r.text for r in answers]
    assert answers[0].json() == {"error": "the planner's process exited (code 3) while planning", "reason": "planner_error"}
    assert health.status_code == 200 and health.json()["planner"]["restarts"] == 2


async def test_what_the_miners_planner_learns_reaches_its_planning_processes() -> None:
    """The planning processes are forks: after ``renew`` (the miner calls it when the
    planner has observed feedback) each plans with the planner as it is now."""
    from miner.workers import PlannerWorkers
    from support.planners import Remembers

    planner = Remembers()
    workers = PlannerWorkers(planner, size=1)
    try:
        before, _ = await workers.plan(PACKAGE, timeout_s=30.0)
        planner.note = "sn7 is slow"
        stale, _ = await workers.plan(PACKAGE, timeout_s=30.0)
        workers.renew()
        after, _ = await workers.plan(PACKAGE, timeout_s=30.0)
    finally:
        workers.close()
    assert [before.reasoning, stale.reasoning, after.reasoning] == ["nothing yet", "nothing yet", "sn7 is slow"]
