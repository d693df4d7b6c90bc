"""deploy/: the alert rules hold under promtool's own unit tests, the committed
dashboard is what its code builds, and the provisioning points where compose mounts."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import subprocess
from pathlib import Path

import pytest

from bittensor.sp_core import Keypair

from support.prometheus import require

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"


def _promtool(*args: str) -> None:
    done = subprocess.run([require("promtool"), *args], capture_output=True, text=True)
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


# -- docker-compose.yml: no Docker engine here, so the file is checked by docker-compose
# itself and its commands are run without containers.

ROOT = DEPLOY.parent
_AS_RUN = {"${DAGNET_NETWORK:-ws://subtensor:9944}": "embedded:/data/chain.sqlite", "${DAGNET_NETUID:-1}": "1"}


def _compose() -> dict:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


@pytest.mark.parametrize("profile", ["subtensor", "embedded"])
def test_compose_file_is_valid_for_docker_compose(profile: str) -> None:
    env = {**os.environ, "COMPOSE_PROFILES": profile}
    if profile == "embedded":
        env["DAGNET_NETWORK"] = "embedded:/data/chain.sqlite"
    done = subprocess.run([require("docker-compose"), "config", "-q"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _dagnet_services() -> dict[str, list[str]]:
    services = _compose()["services"]
    return {name: [_AS_RUN.get(arg, arg) for arg in spec["command"]]
            for name, spec in services.items() if isinstance(spec.get("command"), list)}


def test_every_compose_command_is_one_the_cli_accepts() -> None:
    import click
    import typer

    from neurons.cli import app

    root = typer.main.get_command(app)
    for name, args in _dagnet_services().items():
        command, rest = root, list(args)
        while isinstance(command, click.Group):
            command = command.get_command(click.Context(command), rest.pop(0))
            assert command is not None, f"{name}: unknown command in {args}"
        command.make_context(name, rest)  # raises on any option the command does not take


def test_every_health_check_asks_the_port_its_process_serves() -> None:
    services = _compose()["services"]
    for name, args in _dagnet_services().items():
        port = args[args.index("--port") + 1]
        assert services[name]["environment"]["DAGNET_HEALTH_PORT"] == port, name
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert "/health" in dockerfile and "DAGNET_HEALTH_PORT" in dockerfile


def test_prometheus_scrapes_every_port_compose_serves_metrics_on() -> None:
    scraped = (DEPLOY / "prometheus" / "prometheus.yml").read_text()
    for name, args in _dagnet_services().items():
        if args[0] in ("validator", "miner"):
            assert f"net:{args[args.index('--port') + 1]}" in scraped, name


def test_bootstrap_script_sets_up_an_embedded_chain(tmp_path: Path) -> None:
    """The chain service's command and the bootstrap script, as the containers run them,
    with /data in a temporary folder: from a chain with no subnet to a started subnet
    owned by //Alice with every role registered; a second run finds it all in place."""
    data = tmp_path / "data"
    data.mkdir()
    chain_args = [arg.replace("/data", str(data)) for arg in _dagnet_services()["chain"]]
    port = chain_args.index("--port") + 1
    chain_args[port] = "0"  # a free port: tests never take fixed ones
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "DAGNET_NETWORK": f"embedded:{data}/chain.sqlite",
           "DATA": str(data)}
    chain = subprocess.Popen([sys.executable, "-m", "neurons", *chain_args], cwd=ROOT, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert "listening on" in chain.stderr.readline()
        assert "does not exist" in _dagnet("chain", "status", "--network", env["DAGNET_NETWORK"]).stderr
        for _ in range(2):  # the second run is a restarted bootstrap container
            done = subprocess.run(["sh", str(DEPLOY / "bootstrap.sh")], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr[-2000:]
        status = _dagnet("chain", "status", "--network", env["DAGNET_NETWORK"], "--json")
        assert status.returncode == 0, status.stderr
        neurons = json.loads(status.stdout)["neurons"]
        alice = Keypair.create_from_uri("//Alice").ss58_address
        assert len(neurons) == 5 and neurons[0]["hotkey"] == alice and neurons[0]["stake"] >= 1000
        subnets = json.loads(_dagnet("subnet", "list", "--network", env["DAGNET_NETWORK"]).stdout)
        assert subnets == [{"netuid": 1, "owner_coldkey": alice}]
        providers = json.loads((data / "providers.json").read_text())
        assert providers[0]["url"] == "http://127.0.0.1:8094"
    finally:
        chain.terminate()
        chain.wait(timeout=30)


def _dagnet(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "neurons", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
