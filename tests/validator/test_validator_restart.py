"""kill -9 a real validator process mid-step, restart it: nothing settled is lost or doubled.

The miners and the tool provider run in the test's event loop; the validator is
``tests/support/validator_process.py`` (``run_validator`` on a clock-driven fake
chain). The kills land at known points of a step: while the provider is running
a node (execute phase) and while a miner is being asked for a plan (query phase).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from miner.app import create_app
from miner.metagraph import StaticMetagraph
from miner.serving import EVERY_TOOL
from miner.settings import MinerSettings
from planners import load_planner
from subnets.registry import default_registry
from support.family import cmdline, descendants, marked, marked_env, outliving
from support.keys import MetagraphBuilder, dev_keypair
from support.peers import axon, serve_asgi
from support.tasks import provider_profiles
from support.tmpfs import fill, needs_root, tmpfs
from support.validator_process import SOURCE
from validator.state import WINDOW_SIZE, ValidatorState

pytestmark = pytest.mark.e2e


ROOT = Path(__file__).resolve().parents[2]
HELPER = ROOT / "tests" / "support" / "validator_process.py"
VALIDATOR = dev_keypair("Alice")
MINERS = {"good": dev_keypair("dagnet-restart-good"), "naive": dev_keypair("dagnet-restart-naive")}
PROVIDER = dev_keypair("dagnet-restart-provider")


class _Tap:
    """ASGI wrapper that signals each request to one path."""

    def __init__(self, app, path: str) -> None:
        self.app, self.path = app, path
        self.hits = 0
        self.changed = asyncio.Event()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"] == self.path:
            self.hits += 1
            self.changed.set()
        await self.app(scope, receive, send)

    async def wait_for(self, hits: int) -> None:
        async with asyncio.timeout(60):
            while self.hits < hits:
                self.changed.clear()
                await self.changed.wait()


@contextlib.asynccontextmanager
async def _network(tmp_path: Path) -> AsyncIterator[tuple[Path, _Tap, _Tap]]:
    profiles = provider_profiles(SOURCE.tasks())
    builder = MetagraphBuilder(netuid=7).validator(VALIDATOR, stake=1_000.0)
    for key in MINERS.values():
        builder.miner(key)
    snapshot = builder.build()
    async with contextlib.AsyncExitStack() as stack:
        axons = {}
        query_tap = None
        for name, key in MINERS.items():
            app = _Tap(
                create_app(
                    MinerSettings(port=0),
                    keypair=key,
                    metagraph=StaticMetagraph(snapshot),
                    registry=default_registry(),
                    planner=load_planner(name),
                ),
                "/WorkflowSynapse",
            )
            query_tap = query_tap or app
            url = await stack.enter_async_context(serve_asgi(app))
            served = axon(url)
            axons[key.ss58_address] = [served.host, served.port]
        node_tap = _Tap(
            create_app(
                MinerSettings(port=0, serve=EVERY_TOOL, provider_tasks=profiles),
                keypair=PROVIDER,
                metagraph=StaticMetagraph(snapshot),
                registry=default_registry(),
                planner=load_planner("good"),
            ),
            "/NodeSynapse",
        )
        provider_url = await stack.enter_async_context(serve_asgi(node_tap))
        spec = {
            "state": str(tmp_path / "validator.sqlite"),
            "hotkey": VALIDATOR.ss58_address,
            "start": time.time(),
            "block_time": 0.5,
            "provider": {"uid": 99, "hotkey": PROVIDER.ss58_address, "url": provider_url},
            "neurons": [
                {
                    "uid": n.uid,
                    "hotkey": n.hotkey,
                    "stake": n.stake,
                    "permit": n.validator_permit,
                    "axon": axons.get(n.hotkey),
                }
                for n in snapshot.neurons
            ],
        }
        spec_path = tmp_path / "spec.json"
        spec_path.write_text(json.dumps(spec))
        yield spec_path, query_tap, node_tap


def _start(spec: Path, log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(HELPER), str(spec)], stdout=log.open("ab"), stderr=subprocess.STDOUT, cwd=ROOT, env=env
    )


def _settled(state_path: Path) -> int:
    if not state_path.exists():
        return 0
    state = ValidatorState(state_path)
    try:
        return state.steps_settled()
    finally:
        state.close()


async def _until_settled(state_path: Path, steps: int, process: subprocess.Popen, log: Path) -> None:
    async with asyncio.timeout(120):
        while _settled(state_path) < steps:
            assert process.poll() is None, log.read_text()[-3000:]
            await asyncio.sleep(0.05)


def _consistent(state_path: Path) -> list[tuple]:
    """Every settled step is whole and the windows are exactly its records; returns the records."""
    state = ValidatorState(state_path)
    try:
        records = state.executions()
        blocks = {r.block for r in records}
        assert state.steps_settled() == len(blocks)
        for block in blocks:
            assert sorted(r.uid for r in records if r.block == block) == [1, 2]
        window, seen = state.window(), state.tasks_seen()
        for uid in (1, 2):
            mine = [r.score["S"] for r in records if r.uid == uid]
            assert seen[uid] == len(mine)
            assert window.count(uid) == min(len(mine), WINDOW_SIZE)
            assert window.to_dict()["scores"][str(uid)] == mine[-WINDOW_SIZE:]
        return [(r.id, r.block, r.uid, r.score["S"], r.plan_hash) for r in records]
    finally:
        state.close()


def _kill(process: subprocess.Popen) -> None:
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


async def test_kill_9_mid_step_loses_nothing_settled(tmp_path: Path) -> None:
    log = tmp_path / "validator.log"
    async with _network(tmp_path) as (spec, query_tap, node_tap):
        state_path = Path(json.loads(spec.read_text())["state"])

        process = _start(spec, log)
        await _until_settled(state_path, 2, process, log)
        await node_tap.wait_for(node_tap.hits + 1)  # a plan is executing: mid-step
        _kill(process)
        first = _consistent(state_path)

        process = _start(spec, log)
        await _until_settled(state_path, len(first) // 2 + 1, process, log)
        await query_tap.wait_for(query_tap.hits + 1)  # a miner is being asked: mid-step
        _kill(process)
        second = _consistent(state_path)
        assert second[: len(first)] == first

        process = _start(spec, log)
        await _until_settled(state_path, len(second) // 2 + 2, process, log)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, log.read_text()[-3000:]
        third = _consistent(state_path)
        assert third[: len(second)] == second
        starts = re.findall(r"resumed_at_block=(\w+)", log.read_text())
        assert starts[0] == "None" and len(starts) == 3 and all(s.isdigit() for s in starts[1:])


async def test_kill_9_mid_step_leaves_no_process_of_the_validator(tmp_path: Path) -> None:
    """Its tool processes and multiprocessing's resource tracker end with it (before: all
    three ran on, re-parented to init, 14 minutes after the suite's kills)."""
    log, marker = tmp_path / "validator.log", uuid.uuid4().hex
    async with _network(tmp_path) as (spec, _, node_tap):
        state_path = Path(json.loads(spec.read_text())["state"])
        process = _start(spec, log, marked_env(marker))
        await _until_settled(state_path, 1, process, log)
        await node_tap.wait_for(node_tap.hits + 1)  # a plan is executing: mid-step
        family = descendants(process.pid)
        started = [cmdline(pid) for pid in family]
        _kill(process)
        survivors = outliving(family | marked(marker), within_s=5.0)
    assert any("multiprocessing.spawn" in line for line in started), started  # the tool processes were up
    assert any("multiprocessing.resource_tracker" in line for line in started), started
    assert survivors == {}


async def test_health_and_metrics_are_served(tmp_path: Path) -> None:
    log = tmp_path / "validator.log"
    async with _network(tmp_path) as (spec, _, _):
        state_path = Path(json.loads(spec.read_text())["state"])
        process = _start(spec, log)
        try:
            await _until_settled(state_path, 1, process, log)
            url = next(line.split()[4] for line in log.read_text().splitlines() if "listening on" in line)
            async with httpx.AsyncClient() as client:
                # Not ok at once: on a loaded machine the first step can take longer than the
                # two tempos (10 s of blocks here) after which no weights is "weights_stale".
                health = await _until_health(client, url, process, log, lambda body: body["status"] == "ok")
                metrics = (await client.get(url + "/metrics")).text
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
    assert health["version_key"] >= 1 and health["steps_settled"] >= 1
    assert 'dagnet_validator_steps_total{outcome="settled"}' in metrics
    assert "dagnet_validator_step_phase_seconds_bucket" in metrics
    assert 'dagnet_validator_miner_incentive{uid="1"}' in metrics and "dagnet_validator_tempo_blocks 10.0" in metrics


@pytest.mark.e2e
@needs_root
async def test_a_full_disk_leaves_the_validator_serving_setting_weights_and_consistent(tmp_path: Path) -> None:
    """The state file on a 2 MiB tmpfs that another file fills: the process stays up, /health
    names the disk, weights keep being set, and steps settle again once space returns."""
    log = tmp_path / "validator.log"
    with tmpfs(tmp_path / "disk", "2m") as disk:
        async with _network(tmp_path) as (spec, _, _):
            state_path = disk / "validator.sqlite"
            spec.write_text(json.dumps({**json.loads(spec.read_text()), "state": str(state_path)}))
            process = _start(spec, log)
            try:
                await _until_settled(state_path, 2, process, log)
                url = next(line.split()[4] for line in log.read_text().splitlines() if "listening on" in line)
                async with httpx.AsyncClient(timeout=10.0) as client:
                    filler = fill(disk)
                    full = await _until_health(client, url, process, log, lambda h: h["status"] == "degraded")
                    assert any("cannot be written" in reason for reason in full["reasons"]), full
                    set_before = full["last_weights_block"]
                    while_full = await _until_health(  # a tempo later, weights were set on the full disk
                        client, url, process, log, lambda h: (h["last_weights_block"] or 0) > (set_before or 0)
                    )
                    settled_while_full = while_full["steps_settled"]
                    assert settled_while_full == full["steps_settled"]
                    metrics = (await client.get(url + "/metrics")).text
                    filler.unlink()
                    await _until_health(client, url, process, log, lambda h: h["steps_settled"] > settled_while_full)
            finally:
                process.send_signal(signal.SIGTERM)
                assert process.wait(timeout=30) == 0, log.read_text()[-3000:]
            assert re.search(r'dagnet_validator_infrastructure_failures_total\{cause="state"\} [1-9]', metrics)
            records = _consistent(state_path)
            state = ValidatorState(state_path)
            assert state.last_weights_block() >= while_full["last_weights_block"]  # written once space returned
            state.close()
            assert records


async def _until_health(client: httpx.AsyncClient, url: str, process: subprocess.Popen, log: Path, condition) -> dict:
    """The first ``/health`` body that meets ``condition``; fails with the last one after 90 s."""
    body: dict = {}
    try:
        async with asyncio.timeout(90):
            while True:
                assert process.poll() is None, log.read_text()[-3000:]
                body = (await client.get(url + "/health")).json()
                if condition(body):
                    return body
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"/health never met the condition in 90 s; last: {body}") from None
