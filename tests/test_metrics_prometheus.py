"""A real Prometheus scrapes a real miner, and stores what the miner's requests did.

Needs the ``prometheus`` and ``promtool`` binaries (Debian package ``prometheus``,
installed by ``scripts/bootstrap``). Without them these tests skip, or fail when
the ``CI`` environment variable is set, so CI cannot pass by skipping.

Prometheus runs as a subprocess on a free loopback port with its config and
TSDB in ``tmp_path``; the fixture always stops it (SIGTERM, then SIGKILL).
Prometheus cannot notify anyone of a scrape, so the test polls its HTTP API
until a bounded deadline.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.keys import fresh_keypair, signed_headers
from support.miner import MinerUnderTest, running_miner

SAMPLE_CONFIG = Path(__file__).resolve().parents[1] / "deploy" / "prometheus" / "prometheus.yml"
DEADLINE_S = 30.0
POLL_INTERVAL_S = 0.1  # Prometheus has no push notification of a scrape: we ask again
STOP_TIMEOUT_S = 10.0

NODE = {"task_id": "t1", "node_id": "n1", "subnet": "sn1", "action": "echo", "params": {"text": "hi"}}
PACKAGE = {
    "task_id": "task-1",
    "task_type": "rag",
    "description": "say hello",
    "constraints": {"max_budget_tao": 1.0, "max_latency_seconds": 10.0, "allowed_subnets": ["sn1"]},
    "available_tools": {"sn1": {"type": "text", "avg_cost": 0.001, "avg_latency": 0.0}},
}


def _require(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        message = f"{binary!r} is not on PATH: install the Debian package 'prometheus' (scripts/bootstrap does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _scrape_config(target: str) -> dict[str, Any]:
    """One ``dagnet-miner`` job scraping ``target`` every second (JSON is valid YAML)."""
    interval = {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"}
    job = {"job_name": "dagnet-miner", "metrics_path": "/metrics", "static_configs": [{"targets": [target]}]}
    return {"global": interval, "scrape_configs": [job]}


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@dataclass
class PrometheusUnderTest:
    url: str
    process: subprocess.Popen
    log: Path

    def _log_tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])

    async def until(self, client: httpx.AsyncClient, path: str, params: dict[str, str], found: Callable) -> Any:
        """Ask ``path`` until ``found(data)`` is not ``None`` and return that.

        Fails with Prometheus's log when it exits, or with the last answer at the deadline.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE_S
        last: Any = "no answer yet"
        while True:
            if self.process.poll() is not None:
                pytest.fail(f"prometheus exited with {self.process.returncode}:\n{self._log_tail()}")
            try:
                response = await client.get(self.url + path, params=params)
                last = response.json()["data"] if response.status_code == 200 else response.text
                result = found(last) if response.status_code == 200 else None
            except httpx.TransportError as exc:  # not listening yet
                last, result = repr(exc), None
            if result is not None:
                return result
            if loop.time() > deadline:
                pytest.fail(f"{path} {params}: not there after {DEADLINE_S} s; last answer: {last}\n{self._log_tail()}")
            await asyncio.sleep(POLL_INTERVAL_S)

    async def series(self, client: httpx.AsyncClient, promql: str, *labels: str) -> dict[tuple[str, ...], float]:
        """The instant vector of ``promql`` once it is non-empty, keyed by ``labels``' values."""
        result = await self.until(client, "/api/v1/query", {"query": promql}, lambda data: data["result"] or None)
        return {tuple(s["metric"].get(label, "") for label in labels): float(s["value"][1]) for s in result}


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Callable[[str], PrometheusUnderTest]]:
    """Starts a real Prometheus scraping one ``host:port`` target; stops it at teardown."""
    binary = _require("prometheus")
    started: list[subprocess.Popen] = []

    def start(target: str) -> PrometheusUnderTest:
        config = tmp_path / "prometheus.yml"
        config.write_text(json.dumps(_scrape_config(target)))
        log = tmp_path / "prometheus.log"
        address = f"127.0.0.1:{_free_port()}"
        command = [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address={address}",
        ]
        with log.open("wb") as sink:
            process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        started.append(process)
        return PrometheusUnderTest(f"http://{address}", process, log)

    yield start
    for process in started:
        _stop(process)


async def _traffic(miner: MinerUnderTest) -> None:
    """Three served node calls, one plan, a replay, a stale and an unregistered caller."""
    assert (await miner.post("/NodeSynapse", NODE)).status_code == 200
    assert (await miner.post("/WorkflowSynapse", PACKAGE)).status_code == 200
    body = json.dumps(NODE).encode()
    headers = signed_headers(miner.validator, miner.keypair, "/NodeSynapse", body)
    assert (await miner.post("/NodeSynapse", body, headers=headers)).status_code == 200
    assert (await miner.post("/NodeSynapse", body, headers=headers)).json()["reason"] == "replayed"
    assert (await miner.post("/NodeSynapse", NODE, age_s=3600)).json()["reason"] == "stale"
    assert (await miner.post("/NodeSynapse", NODE, signer=fresh_keypair())).json()["reason"] == "unregistered"
    assert (await miner.post("/NodeSynapse", NODE)).status_code == 200


async def test_prometheus_scrapes_what_the_requests_did(prometheus) -> None:
    async with running_miner() as miner, httpx.AsyncClient(timeout=5.0) as client:
        await _traffic(miner)
        prom = prometheus(miner.url.removeprefix("http://"))

        def miner_is_up(data: dict) -> dict | None:
            targets = [t for t in data["activeTargets"] if t["labels"]["job"] == "dagnet-miner"]
            return targets[0] if targets and targets[0]["health"] == "up" else None

        target = await prom.until(client, "/api/v1/targets", {"state": "active"}, miner_is_up)
        assert target["scrapeUrl"] == miner.url + "/metrics"

        requests = await prom.series(client, "dagnet_miner_requests_total", "endpoint", "code")
        assert requests[("/NodeSynapse", "200")] == 3
        assert requests[("/NodeSynapse", "401")] == 2
        assert requests[("/NodeSynapse", "403")] == 1
        assert requests[("/WorkflowSynapse", "200")] == 1
        auth = await prom.series(client, "dagnet_miner_auth_failures_total", "reason")
        assert auth == {("replayed",): 1, ("stale",): 1}
        blacklisted = await prom.series(client, "dagnet_miner_blacklisted_total", "reason")
        assert blacklisted == {("unregistered",): 1}
        nodes = await prom.series(client, "dagnet_miner_node_calls_total", "action", "outcome")
        assert nodes == {("echo", "success"): 3}
        latency = await prom.series(client, 'dagnet_miner_request_latency_seconds_count{endpoint="/NodeSynapse"}')
        assert latency == {(): 6}

        metadata = await prom.until(client, "/api/v1/metadata", {}, lambda data: data or None)
        assert metadata["dagnet_miner_requests_total"][0]["type"] == "counter"
        assert metadata["dagnet_miner_request_latency_seconds"][0]["type"] == "histogram"


def test_sample_config_is_valid_for_promtool() -> None:
    promtool = _require("promtool")
    checked = subprocess.run([promtool, "check", "config", str(SAMPLE_CONFIG)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "job_name: dagnet-miner" in SAMPLE_CONFIG.read_text()
