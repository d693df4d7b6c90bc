"""The dashboard against a running subnet: `dagnet localnet` scraped by a real Prometheus.

Every query of every panel of deploy/grafana/dashboards/dagnet.json must return data
through Prometheus's HTTP API while the network runs (Grafana itself cannot be installed
here; a panel whose query answers is a panel Grafana can draw), and every panel must
name only metrics a dagnet process exports.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.e2e


ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "dagnet.json"
_METRIC = re.compile(r"\b(dagnet_[a-z0-9_]+)")
_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def _panel_queries() -> list[tuple[str, str]]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [(p["title"], t["expr"]) for p in panels if p["type"] != "row" for t in p["targets"]]


def _exported_metric_names() -> set[str]:
    from miner.prometheus import MinerMetrics
    from validator.prometheus import ValidatorMetrics

    names = set()
    for registry in (ValidatorMetrics().registry, MinerMetrics().registry):
        for family in registry.collect():
            names.add(family.name + ("_total" if family.type == "counter" else ""))
            if family.type == "histogram":
                names.update(family.name + suffix for suffix in _HISTOGRAM_SUFFIXES)
    return names


def test_every_panel_names_only_metrics_dagnet_exports() -> None:
    exported = _exported_metric_names()
    for title, expr in _panel_queries():
        named = set(_METRIC.findall(expr))
        assert named and named <= exported, f"{title}: {sorted(named - exported)} not exported"


def _wait_for_file(path: Path, process: subprocess.Popen, deadline: float) -> None:
    while not path.exists():
        assert process.poll() is None, process.stderr.read()[-3000:]
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.2)


async def test_every_panel_returns_data_from_a_running_localnet(tmp_path: Path, prometheus) -> None:
    run_dir = tmp_path / "net"
    net = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "neurons",
            "localnet",
            "--miners",
            "4",
            "--duration",
            "600",
            "--tempo",
            "8",
            "--block-time",
            "0.5",
            "--json",
            "--dir",
            str(run_dir),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        targets = run_dir / "prometheus-targets.json"
        _wait_for_file(targets, net, time.monotonic() + 240)
        prom = prometheus(
            {
                "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
                "scrape_configs": [{"job_name": "dagnet-localnet", "file_sd_configs": [{"files": [str(targets)]}]}],
            }
        )
        async with httpx.AsyncClient(timeout=5.0) as client:

            def every_role_up(data: dict) -> set[str] | None:
                roles = {s["metric"]["role"] for s in data["result"]}
                return roles if roles >= {"validator", "miner"} else None

            await prom.until(client, "/api/v1/query", {"query": 'up{job="dagnet-localnet"} == 1'}, every_role_up)
            # The leaderboard needs an epoch after weights were set; wait for its emission.
            await prom.until(
                client,
                "/api/v1/query",
                {"query": "max(dagnet_validator_miner_emission_tao) > 0"},
                lambda data: data["result"] or None,
                deadline_s=240,
            )
            for _title, expr in _panel_queries():
                query = expr.replace("$__rate_interval", "20s")
                await prom.until(
                    client, "/api/v1/query", {"query": query}, lambda data: data["result"] or None, deadline_s=60
                )
    finally:
        net.send_signal(signal.SIGINT)
        out, err = net.communicate(timeout=120)
    assert net.returncode == 0, err[-3000:]
    assert json.loads(out)["steps"] > 0
