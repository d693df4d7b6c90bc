"""Planning is supervised and shared fairly (docs/hardening.md, "The miner's planning").

A planner that spins is killed at the deadline, one that exits costs its query, and one
validator flooding the miner with packages that make the planner spin cannot make
another validator's queries time out.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from miner.fairshare import USAGE_TAU_S, Busy, FairShare
from miner.metagraph import snapshot_to_dict
from miner.quota import PlanningQuota, QuotaExceeded
from miner.settings import MinerSettings
from protocol.synapse import TaskPackage
from support.keys import MetagraphBuilder, dev_keypair, signed_headers
from support.miner import running_miner
from support.planners import DOOMED, SLOW, BurnsCpu, SpinsOnDoomed
from support.polling import until

ROOT = Path(__file__).resolve().parents[2]
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
            return [
                r.status_code
                for r in await asyncio.gather(*sent, return_exceptions=True)
                if isinstance(r, httpx.Response)
            ]

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
    quota = PlanningQuota(slots=4, per_validator=1, queue_per_validator=0, cpu_per_s=1.0, cpu_burst_s=10.0)

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
    quota = PlanningQuota(
        slots=4, per_validator=1, queue_per_validator=0, cpu_per_s=0.5, cpu_burst_s=2.0, clock=lambda: now[0]
    )

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


async def _waiter(share: FairShare, hotkey: str) -> asyncio.Task[None]:
    """``hotkey``'s query waiting for a process (a task, so the test can see whether it got one)."""
    task = asyncio.ensure_future(share.acquire(hotkey))
    await asyncio.sleep(0)  # let it run up to its wait
    return task


async def test_two_flooding_validators_share_every_process_but_one() -> None:
    share = FairShare(2, per_validator=1, queue_per_validator=2)
    await share.acquire("alice")  # each floods: one query planning, two waiting
    alice = [await _waiter(share, "alice") for _ in range(2)]
    await share.acquire("bob")  # its first query found the last process (it was alone then)
    bob = [await _waiter(share, "bob") for _ in range(2)]
    share.release("alice")
    share.release("bob")
    await asyncio.sleep(0)
    assert [t.done() for t in alice + bob] == [True, False, False, False]  # one of them, the other held back
    assert share.free == 1
    await share.acquire("charlie")  # a validator with one query finds the process kept free
    assert share.free == 0
    alice.append(await _waiter(share, "alice"))  # alice sends another, as a flood does
    share.release("charlie")
    share.release("alice")
    await asyncio.sleep(0)
    assert [t.done() for t in alice + bob] == [True, False, False, True, False]  # bob's turn, not alice's second
    assert share.free == 1
    for task in alice + bob:
        task.cancel()


async def test_a_validator_past_its_queue_is_refused_and_a_leaving_one_frees_its_place() -> None:
    share = FairShare(1, per_validator=1, queue_per_validator=1)
    await share.acquire("alice")
    waiting = await _waiter(share, "alice")
    with pytest.raises(Busy, match="already has 1 planning query running and 1 waiting"):
        await share.acquire("alice")
    bob = await _waiter(share, "bob")
    waiting.cancel()  # alice's caller went away
    await asyncio.sleep(0)
    assert share.waiting("alice") == 0
    share.release("alice")
    await asyncio.sleep(0)
    assert bob.done() and share.free == 0
    share.release("bob")
    assert share.free == 1 and share.waiting("bob") == 0


async def test_a_validator_that_held_a_process_most_of_the_last_seconds_is_not_light() -> None:
    """Sequential floods: alice and bob each send one query at a time, back to back. Once
    alice has held a process for most of the last USAGE_TAU_S, the last process is not hers
    but charlie's, who asks now and then."""
    now = [0.0]
    share = FairShare(2, per_validator=1, queue_per_validator=2, clock=lambda: now[0])
    await share.acquire("alice")
    await share.acquire("bob")  # both light at first: nothing held yet
    now[0] = USAGE_TAU_S  # each has held a process all along: 6.3 s, over LIGHT_USE's 5 s
    share.release("alice")
    alice = await _waiter(share, "alice")  # her next query, at once
    assert not alice.done() and share.free == 1
    await share.acquire("charlie")  # who has held nothing
    share.release("charlie")
    await asyncio.sleep(0)
    assert not alice.done() and share.free == 1  # still not hers: she weighs over LIGHT_USE
    share.release("bob")  # a second process free: anyone's, in turn
    await asyncio.sleep(0)
    assert alice.done()


async def test_with_one_process_every_validator_takes_its_turn() -> None:
    share = FairShare(1, per_validator=1, queue_per_validator=3)
    await share.acquire("alice")
    order: list[str] = []

    async def query(hotkey: str) -> None:
        await share.acquire(hotkey)
        order.append(hotkey)
        share.release(hotkey)

    tasks = [asyncio.ensure_future(query(h)) for h in ("alice", "alice", "alice", "bob", "charlie")]
    await asyncio.sleep(0)
    share.release("alice")
    await asyncio.gather(*tasks)
    assert order == ["alice", "bob", "charlie", "alice", "alice"]


SAMPLES = 15
ASK_EVERY_S = 1.0
"""//Charlie asks once a second (a validator asks a miner once a step): it holds a process
about a quarter of the time, under ``LIGHT_USE``."""


@pytest.mark.e2e  # a real miner process; about 45 s each
@pytest.mark.parametrize("loops", [3, 1], ids=["queued", "one-at-a-time"])
async def test_two_flooding_validators_leave_a_third_its_quiet_latency(tmp_path: Path, loops: int) -> None:
    """//Alice and //Dave keep the miner busy with packages that take 2 s to plan, each with
    ``loops`` outstanding (3: one planning, two waiting; 1: one after another, back to back);
    //Charlie's queries (0.2 s to plan) keep their p50 within 2x of the p50 measured before
    the flood."""
    alice, charlie, dave, bob = (dev_keypair(name) for name in ("Alice", "Charlie", "Dave", "Bob"))
    snapshot = MetagraphBuilder(netuid=1).validator(alice).validator(charlie).validator(dave).miner(bob).build()
    async with (
        _served_miner(tmp_path, snapshot, "support.planners:SlowOnSlow") as url,
        httpx.AsyncClient(timeout=30) as client,
    ):

        async def ask(signer, task_id: str) -> httpx.Response:
            body = json.dumps(_package(task_id)).encode()
            headers = signed_headers(signer, bob, "/WorkflowSynapse", body)
            return await client.post(url + "/WorkflowSynapse", content=body, headers=headers)

        async def latencies() -> list[float]:
            taken = []
            for i in range(SAMPLES):
                started = time.perf_counter()
                response = await ask(charlie, f"quick-{i}")
                assert response.status_code == 200, response.text
                taken.append(time.perf_counter() - started)
                await asyncio.sleep(max(0.0, ASK_EVERY_S - taken[-1]))  # its pace, not a wait for anything
            return sorted(taken)

        answered: dict[str, list[httpx.Response]] = {"alice": [], "dave": []}

        async def flood(name: str, signer) -> None:
            for i in itertools.count():
                response = await ask(signer, f"{SLOW}-{name}-{i}")
                answered[name].append(response)
                if response.status_code == 429:  # as a client that honours Retry-After
                    await asyncio.sleep(float(response.headers["retry-after"]))

        quiet = await latencies()
        flooders = [
            asyncio.ensure_future(flood(name, signer))
            for name, signer in (("alice", alice), ("dave", dave))
            for _ in range(loops)
        ]
        try:
            await until(
                lambda: all(any(r.status_code == 200 for r in got) for got in answered.values()), timeout_s=60
            )  # the flood is under way: each flooder has had a plan
            await asyncio.sleep(USAGE_TAU_S)  # the window over which the miner weighs who held its processes
            flooded = await latencies()
            still = [len(got) for got in answered.values()]
        finally:
            for task in flooders:
                task.cancel()
            await asyncio.gather(*flooders, return_exceptions=True)
    figures = {
        "loops": loops,
        "quiet_p50_ms": round(1e3 * quiet[SAMPLES // 2]),
        "flooded_p50_ms": round(1e3 * flooded[SAMPLES // 2]),
        "flooders_answered": still,
        "flood_statuses": sorted({(r.status_code, r.json().get("reason")) for got in answered.values() for r in got}),
    }
    print(f"\nplanning flood: {json.dumps(figures)}")
    assert flooded[SAMPLES // 2] <= 2 * quiet[SAMPLES // 2], figures
    assert {status for status, _ in figures["flood_statuses"]} <= {200, 429}, figures
    assert all(reason == "planner_busy" for status, reason in figures["flood_statuses"] if status == 429), figures


@contextlib.asynccontextmanager
async def _served_miner(tmp_path: Path, snapshot, planner: str) -> AsyncIterator[str]:
    """``dagnet miner`` (as //Bob) in a process of its own with ``planner``; yields its URL."""
    metagraph = tmp_path / "mg.json"
    metagraph.write_text(json.dumps(snapshot_to_dict(snapshot)))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "neurons.miner",
            "--dev-key",
            "//Bob",
            "--metagraph-file",
            str(metagraph),
            "--port",
            "0",
            "--planner",
            planner,
            "--log-level",
            "warning",
            "--set",
            f"feedback_db={tmp_path / 'feedback' / 'feedback.sqlite'}",
        ],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "tests")},
    )
    try:
        line = proc.stderr.readline()
        assert "listening on" in line, line
        yield line.split("listening on ")[1].split()[0]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.e2e
async def test_a_planner_that_exits_costs_its_query_not_the_miner(tmp_path: Path) -> None:
    validator, miner_key = dev_keypair("Alice"), dev_keypair("Bob")
    metagraph = tmp_path / "mg.json"
    metagraph.write_text(
        json.dumps(snapshot_to_dict(MetagraphBuilder(netuid=1).validator(validator).miner(miner_key).build()))
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "neurons.miner",
            "--dev-key",
            "//Bob",
            "--metagraph-file",
            str(metagraph),
            "--port",
            "0",
            "--planner",
            "support.planners:ExitsOnDoomed",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "tests")},
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
    assert answers[0].json() == {
        "error": "the planner's process exited (code 3) while planning",
        "reason": "planner_error",
    }
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
