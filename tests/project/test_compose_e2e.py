"""The compose testnet on a real Docker engine (README, "A local testnet in containers").

Starts the engine if it is not running (``scripts/docker-engine``: Debian's docker.io, the
compose v2 plugin; the session stops it again, ``support.docker``), builds the base image
where none can be pulled (``scripts/build-base-image``, cached: reused while it exists;
labelled, as every image built here, for ``scripts/clean-test-images``), the dagnet image through
compose and Prometheus from Debian's package, brings up the embedded profile without Grafana
(its image cannot be pulled here and nothing of dagnet's runs in it), and waits until the
validator has set weights with its code sandbox working, a code family has scored above 0,
the emission goes where the margin rule sends it (the learner when it beats the reference,
else the burn to the owner's uid 0, a key of its own: never the validator's, never good,
naive or invalid), bootstrap has logged no error, and Prometheus scrapes every neuron; then
runs ``python_exec`` calls and judgings in the validator's container (60 of each;
``DAGNET_COMPOSE_SANDBOX_RUNS`` sets another number, e.g. 200) and counts the zombies in
every neuron's container; then ``down -v``.

``DAGNET_COMPOSE`` picks the compose that runs it (default ``docker-compose``, Debian's 1.29;
``docker compose`` for v2); ``DAGNET_BASE_IMAGE`` an image to build on instead of the
debootstrapped one (e.g. ``python:3.11-slim-bookworm`` where a registry is reachable).
Skipped, saying why, only where no engine can be started (not root, no apt, no dockerd).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from bittensor.sp_core import Keypair

from support.docker import LABEL

# Binds the host ports the page names (9100, 8091, …): one test at a time among those that do.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("host-ports")]

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "dagnet-e2e"
SERVICES = [
    "net",
    "chain",
    "bootstrap",
    "validator",
    "miner-good",
    "miner-naive",
    "miner-invalid",
    "miner-learner",
    "prometheus",
]
NEURON_PORTS = {
    "validator": 9100,
    "miner-good": 8091,
    "miner-naive": 8092,
    "miner-invalid": 8093,
    "miner-learner": 8094,
}
PAID = {Keypair.create_from_uri(uri).ss58_address for uri in ("//Ferdie", "//Eve")}
"""Who may hold the most incentive: the subnet's owner (uid 0, the burn) or the learner (//Eve)."""
PROMETHEUS_IMAGE = "dagnet-prometheus:local"
BASE_IMAGE = "dagnet-test-base:bookworm"
"""The suite's own debootstrapped base (labelled; dagnet:local built on it inherits the label),
apart from the dagnet-base:bookworm the README has you build."""
SETTLE_S = 300.0
"""How long the running stack may take to show all it must (weights, code, incentive, scrapes)."""
BUILD_S = 600


def _run(args: list[str], *, env: dict[str, str] | None = None, timeout: float = BUILD_S) -> str:
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{shlex.join(args)} exited {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def compose_env(docker_engine: None) -> dict[str, str]:
    base = os.environ.get("DAGNET_BASE_IMAGE") or BASE_IMAGE
    if "DAGNET_BASE_IMAGE" not in os.environ:
        _run([str(ROOT / "scripts" / "build-base-image"), "--host-ca", "--label", LABEL, base])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSE_", "DAGNET_"))}
    return {
        **env,
        "COMPOSE_PROFILES": "embedded",
        "COMPOSE_PROJECT_NAME": PROJECT,
        "DAGNET_BASE_IMAGE": base,
        "DAGNET_PROMETHEUS_IMAGE": PROMETHEUS_IMAGE,
    }


def _compose(env: dict[str, str], *args: str, timeout: float = BUILD_S) -> str:
    command = shlex.split(os.environ.get("DAGNET_COMPOSE", "docker-compose"))
    return _run([*command, *args], env=env, timeout=timeout)


@pytest.fixture(scope="module")
def image(compose_env: dict[str, str]) -> str:
    """dagnet:local, built by compose as `up` would (the `net` service's build)."""
    _compose(compose_env, "build", "net")
    return "dagnet:local"


@pytest.fixture(scope="module")
def stack(compose_env: dict[str, str], image: str) -> Iterator[dict[str, str]]:
    _run(
        [
            "docker",
            "build",
            "-q",
            "-f",
            "deploy/prometheus/Dockerfile",
            "--build-arg",
            f"BASE={compose_env['DAGNET_BASE_IMAGE']}",
            "--label",
            LABEL,
            "-t",
            PROMETHEUS_IMAGE,
            "deploy/prometheus",
        ]
    )
    _compose(compose_env, "down", "-v", "--remove-orphans")  # a stack left by an interrupted run
    try:
        _compose(compose_env, "up", "-d", *SERVICES)
        yield compose_env
    finally:
        _compose(compose_env, "down", "-v", "--remove-orphans")


def _packages() -> set[str]:
    """Every top-level package pyproject.toml's find includes, each found under one of its ``where`` folders."""
    import tomllib

    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    declared = {p.rstrip("*") for p in find["include"]}
    on_disk = {p.parent.name for where in find.get("where", ["."]) for p in (ROOT / where).glob("*/__init__.py")}
    assert declared <= on_disk, f"pyproject.toml declares packages the checkout lacks: {declared - on_disk}"
    return declared


def test_the_image_holds_every_package_and_runs_the_cli(image: str) -> None:
    assert "Usage: dagnet" in _run(["docker", "run", "--rm", image, "--help"])
    packages = sorted(_packages())
    found = _run(
        [
            "docker",
            "run",
            "--rm",
            "--entrypoint",
            "python",
            image,
            "-c",
            "import importlib, sys; [importlib.import_module(p) for p in sys.argv[1:]]; print('ok')",
            *packages,
        ]
    )
    assert found.strip() == "ok"


def test_the_image_runs_code_in_the_sandbox_as_the_validator_service_does(image: str) -> None:
    """The validator service's options (docker-compose.yml), on `docker run`: bwrap with its own
    /proc, where the run sees only its own processes, under a validator with no capability."""
    program = (
        "import json, os; from sandbox import isolation_available, run_python\n"
        "caps = [line.split()[1] for line in open('/proc/self/status') if line.startswith('Cap')]\n"
        "run = run_python({'m.py': 'import os; print(6 * 7, *(p for p in os.listdir(\"/proc\") if p.isdigit()))'}, ['m.py'])\n"
        "print(json.dumps([os.getuid(), sorted(set(caps)), isolation_available(), run.returncode, run.stdout.split(), run.stderr[-300:]]))\n"
    )
    out = _run(
        [
            "docker",
            "run",
            "--rm",
            "--user",
            "0",
            "--cap-add",
            "SYS_ADMIN",
            "--security-opt",
            "seccomp=deploy/seccomp-bwrap.json",
            "--security-opt",
            "apparmor=unconfined",
            "--security-opt",
            "no-new-privileges:true",
            "--entrypoint",
            "dagnet-contained",
            image,
            "python",
            "-c",
            program,
        ]
    )
    uid, caps, isolation, returncode, words, stderr = json.loads(out)
    assert (uid, caps, isolation, returncode) == (10001, ["0000000000000000"], "bwrap", 0), out
    assert words[0] == "42" and len(words) <= 3, out  # its own pids only: bwrap's init and the run


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def _observe(env: dict[str, str]) -> dict[str, object]:
    """What the stack shows now: the validator's /health, the best code quality it recorded,
    the incentive on chain by hotkey, and Prometheus's scrape targets by health."""
    seen: dict[str, object] = {}
    try:
        seen["health"] = _get("http://127.0.0.1:9100/health")
    except OSError as exc:
        seen["health"] = repr(exc)
    query = (
        "import sqlite3; db = sqlite3.connect('file:/data/validator.sqlite?mode=ro', uri=True); "
        "print(db.execute(\"SELECT max(json_extract(score, '$.output_quality')) FROM executions "
        "WHERE base_task_id LIKE 'code%'\").fetchone()[0])"
    )
    try:
        seen["code_quality"] = _compose(env, "exec", "-T", "chain", "python", "-c", query, timeout=30).strip()
        status = json.loads(
            _compose(
                env, "exec", "-T", "chain", "dagnet", "chain", "status", "--network", "embedded", "--json", timeout=30
            )
        )
        seen["incentive"] = {n["hotkey"]: n["incentive"] for n in status["neurons"]}
    except (AssertionError, ValueError, subprocess.TimeoutExpired) as exc:
        seen["chain"] = str(exc)[-500:]
    try:
        targets = _get("http://127.0.0.1:9090/api/v1/targets")["data"]["activeTargets"]  # type: ignore[index]
        seen["scrapes"] = {t["scrapeUrl"]: t["health"] for t in targets}
    except OSError as exc:
        seen["scrapes"] = repr(exc)
    return seen


def _settled(seen: dict[str, object]) -> bool:
    health, incentive, scrapes = seen.get("health"), seen.get("incentive"), seen.get("scrapes")
    return (
        isinstance(health, dict)
        and health["status"] == "ok"
        and health["last_weights_block"] is not None
        and seen.get("code_quality") not in (None, "None")
        and float(seen["code_quality"]) > 0  # type: ignore[arg-type]
        and isinstance(incentive, dict)
        and max(incentive.values(), default=0) > 0
        and max(incentive, key=incentive.get) in PAID
        and isinstance(scrapes, dict)
        and all(scrapes.get(f"http://net:{port}/metrics") == "up" for port in NEURON_PORTS.values())
    )


def test_the_embedded_profile_sets_weights_scores_code_and_is_scraped(stack: dict[str, str]) -> None:
    deadline = time.monotonic() + SETTLE_S
    seen = _observe(stack)
    while not _settled(seen) and time.monotonic() < deadline:
        time.sleep(5)  # polling a live stack: blocks are 2 s, Prometheus scrapes every 15 s
        seen = _observe(stack)
    logs = "" if _settled(seen) else _compose(stack, "logs", "--tail", "30", "validator", timeout=60)
    assert _settled(seen), f"after {SETTLE_S:.0f} s the stack shows {json.dumps(seen, indent=1)}\n{logs[-4000:]}"
    bootstrap = _compose(stack, "logs", "--no-color", "bootstrap", timeout=60)
    assert "subnet 1 ready" in bootstrap and "error" not in bootstrap.lower(), bootstrap[-3000:]


SANDBOX_RUNS = """
import json, os, sys, time
from sandbox.calls import Call, call_function
from scoring.quality.code import JUDGING
from subnets.base import ToolContext
from subnets.python_exec import python_exec_spec
import asyncio
runs = int(sys.argv[1])
tool = python_exec_spec().fn
for i in range(runs):
    result = asyncio.run(tool({"code": "print(%d)" % i}, ToolContext("t", "n", 1, 10.0)))
    assert result.output.text.strip() == str(i), result
for i in range(runs):
    report = call_function("def f(x):\\n    return x + 1\\n", "f", [Call(args=(i,))], budget=JUDGING)
    assert [o.value for o in report.outcomes] == [i + 1], report
print(runs)
"""
"""``runs`` python_exec calls, then ``runs`` judgings, through the sandbox as the validator runs
them (as the validator's user, in its container)."""

ZOMBIES = """
import os
zombies = []
for name in os.listdir("/proc"):
    try:
        stat = open("/proc/%s/stat" % name).read()
    except OSError:
        continue
    fields = stat[stat.rfind(")") + 2 :].split()
    if fields[0] == "Z":
        zombies.append("%s@%s" % (name, fields[19]))
print(" ".join(zombies))
"""
"""The zombies in the container's pid namespace, each as pid@start-time (a pid may be reused)."""


def _zombies(stack: dict[str, str], service: str) -> set[str]:
    return set(_compose(stack, "exec", "-T", service, "python", "-c", ZOMBIES, timeout=60).split())


def _lasting_zombies(stack: dict[str, str], service: str, *, within: float) -> set[str]:
    """The zombies seen now that are still there ``within`` seconds later. A process that
    has just exited is a zombie until its parent waits for it, so one reading may show a
    few; a zombie nobody reaps stays, and that is what this returns."""
    seen = _zombies(stack, service)
    deadline = time.monotonic() + within
    while seen and time.monotonic() < deadline:
        seen &= _zombies(stack, service)
    return seen


def test_sandbox_runs_leave_no_zombie_in_any_container(stack: dict[str, str]) -> None:
    """Before the image ran an init, the neuron was PID 1 and reaped no stranger: each run
    left one exited bwrap (containers/bubblewrap#697), one per run here."""
    count = os.environ.get("DAGNET_COMPOSE_SANDBOX_RUNS", "60")
    runs = _compose(stack, "exec", "-T", "-u", "dagnet", "validator", "python", "-c", SANDBOX_RUNS, count, timeout=1800)
    assert runs.strip() == count
    lasting = {service: _lasting_zombies(stack, service, within=30.0) for service in ("chain", *NEURON_PORTS)}
    assert lasting == {service: set() for service in ("chain", *NEURON_PORTS)}
