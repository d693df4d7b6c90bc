"""A real Prometheus scrapes a real miner, and stores what the miner's requests did; and
scrapes a validator that cannot judge code, and fires the shipped alert for it.

Needs the ``prometheus`` and ``promtool`` binaries (Debian package ``prometheus``,
installed by ``scripts/bootstrap``). Without them these tests skip, or fail when
the ``CI`` environment variable is set, so CI cannot pass by skipping.

The ``prometheus`` fixture (tests/support/prometheus.py) runs it on a free loopback port.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

import neurons.validator as process
import validator.sources as sources
from support.health import VALIDATOR, validator_loop
from support.keys import MetagraphBuilder, fresh_keypair, signed_headers
from support.miner import MinerUnderTest, running_miner
from support.peers import serve_asgi
from support.prometheus import require

pytestmark = pytest.mark.e2e


SAMPLE_CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "prometheus.yml"
ALERT_RULES = SAMPLE_CONFIG.with_name("alerts.yml")
NODE = {"task_id": "t1", "node_id": "n1", "subnet": "sn1", "action": "echo", "params": {"text": "hi"}}
PACKAGE = {
    "task_id": "task-1",
    "task_type": "rag",
    "description": "say hello",
    "constraints": {"max_budget_tao": 1.0, "max_latency_seconds": 10.0, "allowed_subnets": ["sn1"]},
    "available_tools": {"sn1": {"type": "text", "avg_cost": 0.001, "avg_latency": 0.0}},
}


def _scrape_config(target: str) -> dict[str, Any]:
    """One ``dagnet-miner`` job scraping ``target`` every second (JSON is valid YAML)."""
    interval = {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"}
    job = {"job_name": "dagnet-miner", "metrics_path": "/metrics", "static_configs": [{"targets": [target]}]}
    return {"global": interval, "scrape_configs": [job]}


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
        prom = prometheus(_scrape_config(miner.url.removeprefix("http://")))

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
        # every reason is exported from the start, at 0 until it happens
        assert auth == {
            ("replayed",): 1,
            ("stale",): 1,
            ("bad_signature",): 0,
            ("wrong_receiver",): 0,
            ("malformed",): 0,
        }
        blacklisted = await prom.series(client, "dagnet_miner_blacklisted_total", "reason")
        assert blacklisted == {("unregistered",): 1}
        nodes = await prom.series(client, "dagnet_miner_node_calls_total", "action", "outcome")
        assert nodes == {("echo", "success"): 3}
        latency = await prom.series(client, 'dagnet_miner_request_latency_seconds_count{endpoint="/NodeSynapse"}')
        assert latency == {(): 6}

        metadata = await prom.until(client, "/api/v1/metadata", {}, lambda data: data or None)
        assert metadata["dagnet_miner_requests_total"][0]["type"] == "counter"
        chain = await prom.series(client, "dagnet_miner_chain_block")
        registered = await prom.series(client, "dagnet_miner_registered")
        assert chain == {(): miner.metagraph.snapshot().block} and registered == {(): 1}
        assert metadata["dagnet_miner_request_latency_seconds"][0]["type"] == "histogram"


def test_sample_config_is_valid_for_promtool() -> None:
    promtool = require("promtool")
    checked = subprocess.run([promtool, "check", "config", str(SAMPLE_CONFIG)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "job_name: dagnet-miner" in SAMPLE_CONFIG.read_text()


async def test_prometheus_fires_the_sandbox_alert_for_a_validator_that_cannot_judge_code(
    prometheus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The validator's own ``/metrics`` with its start-up sandbox check failing, scraped with
    the shipped alert rules loaded: the rule reads the series the validator exports."""
    monkeypatch.setattr(sources, "isolation_available", lambda: "rlimits")
    snapshot = MetagraphBuilder(netuid=7).validator(VALIDATOR).build()
    async with validator_loop(tmp_path, snapshot) as (loop, chain, metrics), httpx.AsyncClient(timeout=5.0) as client:
        check = sources.start_sandbox_check()
        async with serve_asgi(process.health_app(loop, metrics, check)) as url:
            target = url.removeprefix("http://")
            assert await check is not None
            await loop.step(chain.head)
            config = _scrape_config(target) | {"rule_files": [str(ALERT_RULES)]}
            config["scrape_configs"][0]["job_name"] = "dagnet-validator"
            prom = prometheus(config)

            def firing(data: dict) -> list | None:
                alerts = [a for a in data["alerts"] if a["labels"]["alertname"] == "DagnetValidatorSandboxUnavailable"]
                return alerts if alerts and alerts[0]["state"] == "firing" else None

            alerts = await prom.until(client, "/api/v1/alerts", {}, firing)
            degraded = await prom.series(client, "dagnet_validator_degraded == 1", "reason")
    assert [a["labels"]["instance"] for a in alerts] == [target]
    assert alerts[0]["annotations"]["summary"].endswith("cannot judge code: it sends no code task")
    assert degraded == {("sandbox_unavailable",): 1.0}
