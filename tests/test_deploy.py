"""deploy/: the alert rules hold under promtool's own unit tests, the committed
dashboard is what its code builds, and the provisioning points where compose mounts."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"


def _require(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        message = f"{binary!r} is not on PATH: install the Debian package (scripts/bootstrap does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def _promtool(*args: str) -> None:
    done = subprocess.run([_require("promtool"), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_alert_rules_are_valid() -> None:
    _promtool("check", "rules", str(DEPLOY / "prometheus" / "alerts.yml"))


def test_alert_rules_fire_when_they_should_and_only_then() -> None:
    _promtool("test", "rules", str(DEPLOY / "prometheus" / "alerts_test.yml"))


def test_every_alert_rule_has_a_unit_test() -> None:
    rules = (DEPLOY / "prometheus" / "alerts.yml").read_text()
    tested = (DEPLOY / "prometheus" / "alerts_test.yml").read_text()
    names = [line.split(":", 1)[1].strip() for line in rules.splitlines() if line.strip().startswith("- alert:")]
    assert names and all(f"alertname: {name}" in tested for name in names)


def _dashboard_module():
    spec = importlib.util.spec_from_file_location("dagnet_dashboard", DEPLOY / "grafana" / "dashboard.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_dashboard_is_what_the_code_builds() -> None:
    pytest.importorskip("grafana_foundation_sdk")
    committed = (DEPLOY / "grafana" / "dashboards" / "dagnet.json").read_text()
    assert committed == _dashboard_module().render(), "run: python deploy/grafana/dashboard.py > deploy/grafana/dashboards/dagnet.json"


def test_dashboard_panels_have_unique_ids_and_a_query_each() -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "dashboards" / "dagnet.json").read_text())
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["targets"] and all(t["expr"] for t in panel["targets"]), panel["title"]
            assert panel["datasource"]["uid"] == "prometheus"
