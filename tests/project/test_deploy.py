"""deploy/: the alert rules hold under promtool's own unit tests, the committed
dashboard is what its code builds, and the provisioning points where compose mounts."""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from bittensor.sp_core import Keypair

from support.prometheus import require

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


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
    assert committed == _dashboard_module().render(), (
        "run: python deploy/grafana/dashboard.py > deploy/grafana/dashboards/dagnet.json"
    )


def test_the_payout_panel_names_where_the_emission_went() -> None:
    """Issue 38: the panel showed every kind with 1 or 0; it now keeps the one kind the last
    weights paid by and shows its name, and its description says what each kind pays whom."""
    panels = json.loads((DEPLOY / "grafana" / "dashboards" / "dagnet.json").read_text())["panels"]
    payout = next(p for p in panels if "dagnet_validator_payout" in json.dumps(p.get("targets", [])))
    assert [t["expr"] for t in payout["targets"]] == ["max by (kind) (dagnet_validator_payout) == 1"]
    assert payout["options"]["textMode"] == "name" and payout["targets"][0]["legendFormat"] == "{{kind}}"
    from scoring.margin import Payout

    assert all(f"{kind}:" in payout["description"] for kind in Payout)


def test_dashboard_panels_have_unique_ids_and_a_query_each() -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "dashboards" / "dagnet.json").read_text())
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["targets"] and all(t["expr"] for t in panel["targets"]), panel["title"]
            assert panel["datasource"]["uid"] == "prometheus"


# -- docker-compose.yml: checked by docker-compose 1.29 and v2 themselves, its structure as
# Compose resolves it, and its commands run without containers (tests/project/test_compose_e2e.py
# runs the stack on a real engine).

ROOT = DEPLOY.parent
PROFILES = ("local", "embedded")
"""COMPOSE_PROFILES, the one switch: each is also the --network every neuron gets."""
SWITCH = "${COMPOSE_PROFILES:-embedded}"
BWRAP_CALLS = {"clone", "clone3", "unshare", "mount", "umount2", "pivot_root"}
"""The calls bubblewrap builds a sandbox with (clone/unshare with namespace flags)."""


def _compose() -> dict:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _docker_compose() -> str:
    path = shutil.which("docker-compose")
    if path is None:
        message = "docker-compose is not on PATH: scripts/bootstrap installs it (Debian package docker-compose)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def _resolved(profile: str) -> dict[str, dict]:
    """The services ``docker-compose config`` gives with nothing but ``COMPOSE_PROFILES`` set
    (variables interpolated, anchors merged), less those the profile leaves out: a copy of
    what the worker read once (a second of ``docker-compose`` a profile)."""
    return copy.deepcopy(_configured(profile))


@functools.cache
def _configured(profile: str) -> dict[str, dict]:
    yaml = pytest.importorskip("yaml")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSE_", "DAGNET_"))}
    done = subprocess.run(
        [_docker_compose(), "config"],
        cwd=ROOT,
        env={**env, "COMPOSE_PROFILES": profile},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    services = yaml.safe_load(done.stdout)["services"]
    return {name: spec for name, spec in services.items() if profile in spec.get("profiles", [profile])}


@pytest.mark.e2e
@pytest.mark.parametrize("profile", PROFILES)
def test_compose_file_is_valid_for_docker_compose(profile: str) -> None:
    assert _resolved(profile)


@pytest.mark.parametrize("profile", PROFILES)
def test_one_switch_picks_the_chain_and_every_neurons_network(profile: str) -> None:
    services = _resolved(profile)
    chains = {name for name, spec in services.items() if "profiles" in spec}
    assert chains == {"local": {"subtensor"}, "embedded": {"chain"}}[profile]
    networks = {
        name: spec["command"][spec["command"].index("--network") + 1]
        for name, spec in services.items()
        if "--network" in spec.get("command", [])
    }
    assert set(networks) == {"validator", "miner-good", "miner-naive", "miner-invalid", "miner-learner"}
    assert set(networks.values()) == {profile} and services["bootstrap"]["environment"]["DAGNET_NETWORK"] == profile
    if profile == "local":  # Bittensor's local: ws://127.0.0.1:9944, the subtensor inside net's namespace
        assert services["subtensor"]["network_mode"] == "service:net"
    else:  # $DAGNET_HOME/chain.sqlite, and the image sets DAGNET_HOME=/data: the chain service's state
        chain = services["chain"]["command"]
        state = chain[chain.index("--state") + 1]
        resolved = subprocess.run(
            [
                sys.executable,
                "-c",
                "from chain.network import parse_network; print(parse_network('embedded').embedded_state)",
            ],
            env={**os.environ, "DAGNET_HOME": "/data"},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert state == resolved == "/data/chain.sqlite" and "DAGNET_HOME=/data" in (DEPLOY / "Dockerfile").read_text()


@pytest.mark.parametrize("profile", PROFILES)
def test_start_up_waits_on_health_checks_of_services_the_profile_runs(profile: str) -> None:
    services = _resolved(profile)
    for name, spec in services.items():
        for target, rule in (spec.get("depends_on") or {}).items():
            assert target in services, f"{name} depends on {target}, which {profile} does not run"
            if rule["condition"] == "service_healthy":
                assert not services[target].get("healthcheck", {}).get("disable"), f"{target} has no health check"
    assert services["bootstrap"]["depends_on"]["net"]["condition"] == "service_healthy"
    port = "9944"  # net is healthy once a chain answers there: the subtensor's RPC or the embedded node's
    assert port in " ".join(services["net"]["healthcheck"]["test"])
    chain = services["subtensor" if profile == "local" else "chain"]
    assert port in " ".join(chain["healthcheck"]["test"])
    if profile == "embedded":
        assert chain["command"][chain["command"].index("--port") + 1] == port
    for name in ("validator", "miner-good", "miner-naive", "miner-invalid", "miner-learner"):
        assert services[name]["depends_on"]["bootstrap"]["condition"] == "service_completed_successfully"


def test_the_default_is_the_profile_that_runs_without_a_registry() -> None:
    """`docker compose up -d` with nothing set: .env and the file's own default both pick the
    embedded chain (the `local` profile pulls the subtensor image from a registry)."""
    assert re.search(r"^COMPOSE_PROFILES=embedded$", (ROOT / ".env").read_text(), re.MULTILINE)
    text = (ROOT / "docker-compose.yml").read_text()
    assert SWITCH in text and "${COMPOSE_PROFILES:-local}" not in text


def test_the_miners_include_the_learner_and_the_subnet_has_an_owner_of_its_own() -> None:
    """Issue 38: with good, naive and invalid only, good (the reference) led and 95 % burned to
    uid 0, the validator's own hotkey, which owned the subnet. Now the learner, which can beat the
    reference, mines beside them, every miner names its --planner (not the deprecated
    --strategy), and the subnet's owner is a key no neuron signs with."""
    commands = _dagnet_services()
    planners = {name: args[args.index("--planner") + 1] for name, args in commands.items() if args[0] == "miner"}
    assert planners == {
        "miner-good": "good",
        "miner-naive": "naive",
        "miner-invalid": "invalid",
        "miner-learner": "learner",
    }
    assert not any("--strategy" in args for args in commands.values())
    neuron_keys = {args[args.index("--dev-key") + 1] for args in commands.values() if "--dev-key" in args}
    script = (DEPLOY / "bootstrap.sh").read_text()
    owner = re.search(r"^OWNER=(\S+)$", script, re.MULTILINE).group(1)
    assert owner not in neuron_keys and len(neuron_keys) == len(commands) - 1  # every neuron its own key
    roles = dict(entry.split("=") for entry in re.search(r'^ROLES="([^"]+)"$', script, re.MULTILINE).group(1).split())
    assert {name: key for name, key in roles.items()} == {
        name: args[args.index("--dev-key") + 1] for name, args in commands.items() if "--dev-key" in args
    }


def test_the_image_is_built_once() -> None:
    services = _compose()["services"]
    assert [name for name, spec in services.items() if "build" in spec] == ["net"]
    dagnet = [name for name, spec in services.items() if spec.get("image") == "dagnet:local"]
    assert set(dagnet) == set(services) - {"subtensor", "prometheus", "grafana"}


def test_only_the_validator_gets_what_bubblewrap_needs() -> None:
    """Nothing either compose refuses (1.29 refuses systempaths=unconfined), no privileged:
    the validator starts as root with CAP_SYS_ADMIN only so dagnet-contained can uncover
    /proc, then runs as uid 10001 with no capability (checked on a real engine by
    tests/project/test_compose_e2e.py)."""
    services = _compose()["services"]
    assert {name for name, spec in services.items() if "security_opt" in spec} == {"validator"}
    validator = services["validator"]
    assert set(validator["security_opt"]) == {
        "seccomp=./deploy/seccomp-bwrap.json",
        "apparmor=unconfined",
        "no-new-privileges:true",
    }
    assert validator["cap_add"] == ["SYS_ADMIN"] and validator["user"] == "0"
    assert validator["entrypoint"] == ["dagnet-contained", "dagnet"]
    assert [name for name, spec in services.items() if spec.get("cap_add") or spec.get("user")] == ["validator"]
    assert not any(spec.get("privileged") for spec in services.values())


@pytest.mark.parametrize("profile", PROFILES)
def test_compose_file_is_valid_for_docker_compose_v2(profile: str) -> None:
    """`docker compose` (v2) accepts the same file; scripts/docker-engine installs the plugin."""
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "compose", "version"], capture_output=True).returncode != 0:
        pytest.skip("no `docker compose` (v2) here: scripts/docker-engine installs it")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSE_", "DAGNET_"))}
    done = subprocess.run(
        [docker, "compose", "config", "-q"],
        cwd=ROOT,
        env={**env, "COMPOSE_PROFILES": profile},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def _denied() -> set[str]:
    profile = json.loads((DEPLOY / "seccomp-bwrap.json").read_text())
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW"
    assert all(rule["action"] == "SCMP_ACT_ERRNO" and not rule.get("args") for rule in profile["syscalls"])
    return {name for rule in profile["syscalls"] for name in rule["names"]}


def test_the_seccomp_profile_lets_bubblewrap_build_its_sandbox_and_nothing_more() -> None:
    denied = _denied()
    assert not denied & BWRAP_CALLS
    assert {"setns", "keyctl", "bpf", "init_module", "kexec_load", "userfaultfd", "io_uring_setup"} <= denied


def test_the_seccomp_profile_denies_nothing_a_sandboxed_run_calls(tmp_path: Path) -> None:
    """Every call the validator, bwrap and the judged program make in one real sandboxed
    run (traced with strace, as this machine's user runs it) is one the profile allows."""
    import sandbox

    strace = shutil.which("strace")
    if strace is None or sandbox.isolation_available() != sandbox.PRIVATE_ISOLATION:
        pytest.skip("needs strace and a working bwrap on this machine")
    trace = tmp_path / "trace"
    program = (
        "from sandbox import run_python; "
        "run = run_python({'m.py': 'import json; print(json.dumps([6 * 7]))'}, ['m.py']); "
        "assert run.stdout.strip() == '[42]', run"
    )
    done = subprocess.run(
        [strace, "-f", "-qq", "-o", str(trace), sys.executable, "-c", program],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    called = set(re.findall(r"^\d+\s+(?:<\.\.\. )?([a-z0-9_]+)[( ]", trace.read_text(), re.MULTILINE))
    assert {"clone", "pivot_root", "mount"} <= called | {"clone3"}  # bwrap did run under the trace
    assert not called & _denied()


def _as_run(value: str) -> str:
    """A compose value as the containers get it on the embedded chain."""
    return {SWITCH: "embedded", "${DAGNET_NETUID:-1}": "1"}.get(value, value)


def _dagnet_services() -> dict[str, list[str]]:
    services = _compose()["services"]
    return {
        name: [_as_run(arg) for arg in spec["command"]]
        for name, spec in services.items()
        if spec.get("image") == "dagnet:local" and isinstance(spec.get("command"), list)
    }


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
        if "healthcheck" in services[name]:
            continue  # its own check, not the image's GET /health
        port = args[args.index("--port") + 1]
        assert services[name]["environment"]["DAGNET_HEALTH_PORT"] == port, name
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert "/health" in dockerfile and "DAGNET_HEALTH_PORT" in dockerfile


def test_prometheus_scrapes_every_port_compose_serves_metrics_on() -> None:
    scraped = (DEPLOY / "prometheus" / "prometheus.yml").read_text()
    for name, args in _dagnet_services().items():
        if args[0] in ("validator", "miner"):
            assert f"net:{args[args.index('--port') + 1]}" in scraped, name


@pytest.mark.e2e
def test_bootstrap_script_sets_up_an_embedded_chain(tmp_path: Path) -> None:
    """The chain service's command and the bootstrap script, as the containers run them,
    with /data in a temporary folder (and DAGNET_HOME there, as the image sets it): from a chain
    with no subnet to a started subnet owned by //Ferdie (a key of its own: its hotkey is uid 0,
    where the emission burns) with every role registered; a second run finds it all in place,
    registers nobody again, and neither run logs an error."""
    data = tmp_path / "data"
    data.mkdir()
    chain_args = [arg.replace("/data", str(data)) for arg in _dagnet_services()["chain"]]
    port = chain_args.index("--port") + 1
    chain_args[port] = "0"  # a free port: tests never take fixed ones
    bin_dir = str(Path(sys.executable).parent)
    network = _as_run(_compose()["services"]["bootstrap"]["environment"]["DAGNET_NETWORK"])
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "DAGNET_NETWORK": network, "DAGNET_HOME": str(data)}
    chain = subprocess.Popen(
        [sys.executable, "-m", "neurons", *chain_args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert "listening on" in chain.stderr.readline()
        assert "does not exist" in _dagnet("chain", "status", "--network", network, env=env).stderr
        runs = []
        for _ in range(2):  # the second run is a restarted bootstrap container
            done = subprocess.run(
                ["sh", str(DEPLOY / "bootstrap.sh")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
            )
            assert done.returncode == 0, done.stderr[-2000:]
            assert "error" not in done.stdout + done.stderr, done.stdout + done.stderr
            runs.append(done.stdout)
        assert runs[0].count("(new)") == 5 and "(already)" not in runs[0], runs[0]
        assert runs[1].count("(already)") == 5 and "(new)" not in runs[1], runs[1]
        status = _dagnet("chain", "status", "--network", network, "--json", env=env)
        assert status.returncode == 0, status.stderr
        neurons = {n["hotkey"]: n for n in json.loads(status.stdout)["neurons"]}
        owner, alice = (Keypair.create_from_uri(uri).ss58_address for uri in ("//Ferdie", "//Alice"))
        assert len(neurons) == 6 and neurons[owner]["uid"] == 0
        assert neurons[alice]["uid"] != 0 and neurons[alice]["stake"] >= 1000
        subnets = json.loads(_dagnet("subnet", "list", "--network", network, env=env).stdout)
        assert subnets == [{"netuid": 1, "owner_coldkey": owner}]
    finally:
        chain.terminate()
        chain.wait(timeout=30)


def _dagnet(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "neurons", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
