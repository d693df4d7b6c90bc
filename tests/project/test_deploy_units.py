"""The supervisor files in deploy/: the systemd units pass ``systemd-analyze verify``, the
pm2 file loads, and each neuron started exactly as its unit's ``ExecStart`` reads (the
unit's environment files filled in for this machine) comes up on the embedded chain and
stops on SIGTERM with exit 0 within the unit's ``TimeoutStopSec``; the validator's state
survives the stop and start an upgrade is (docs/operating.md#upgrading)."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from chain.network import Network
from chain.sdk import SdkChain
from neurons.keys import open_wallet
from protocol.synapse import SCORING_VERSION
from protocol.version import package_version
from support.chain import running_node
from validator.state import ValidatorState

ROOT = Path(__file__).resolve().parents[2]
SYSTEMD = ROOT / "deploy" / "systemd"
UNITS = sorted(SYSTEMD.glob("*.service"))
DAGNET = Path(sys.executable).parent / "dagnet"
"""The console script of the interpreter running the tests, standing in for /opt/dagnet's."""
INSTALLED = "/opt/dagnet/.venv/bin/dagnet"


def unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """A unit file as systemd reads it: section → key → values (a key may repeat)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def env_file(path: Path) -> dict[str, str]:
    pairs = (
        line.split("=", 1)
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    )
    return {key.strip(): value.strip() for key, value in pairs}


def exec_start(service: dict[str, list[str]], env: dict[str, str]) -> list[str]:
    """``ExecStart`` as systemd expands it: ``${VAR}`` is one word, a word that is ``$VAR``
    is the variable's value split on whitespace."""
    (line,) = service["ExecStart"]
    words: list[str] = []
    for word in shlex.split(line):
        bare = re.fullmatch(r"\$(\w+)", word)
        if bare:
            words.extend(env.get(bare.group(1), "").split())
        else:
            words.append(re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], word))
    return words


def seconds(value: str) -> float:
    assert re.fullmatch(r"\d+", value), f"TimeoutStopSec={value}: write plain seconds"
    return float(value)


def test_every_neuron_has_a_unit_and_an_env_template() -> None:
    assert {path.name for path in UNITS} == {
        "dagnet-validator.service",
        "dagnet-miner.service",
        "dagnet-miner@.service",
    }
    for path in UNITS:
        service = unit(path)["Service"]
        (env,) = service["EnvironmentFile"]
        template = SYSTEMD / Path(env.replace("miner-%i", "miner")).name
        assert template.is_file(), f"{path.name}: no template for {env}"
        assert exec_start(service, env_file(template))[0] == INSTALLED


@pytest.mark.parametrize("path", UNITS, ids=lambda p: p.name)
def test_the_restart_policy_is_the_one_the_neurons_need(path: Path) -> None:
    sections = unit(path)
    service = sections["Service"]
    one = {key: values[-1] for key, values in service.items()}
    assert one["KillSignal"] == "SIGTERM" and one["KillMode"] == "control-group"
    assert one["Restart"] == "always" and float(one["RestartSec"]) > 0
    assert sections["Unit"]["StartLimitIntervalSec"] == ["0"]  # never gives up
    assert one["User"] == "dagnet" and one["WorkingDirectory"].startswith("/var/lib/dagnet/")
    assert one["WorkingDirectory"] == "/var/lib/" + one["StateDirectory"]
    from validator.settings import ValidatorSettings

    # the validator ends its step in flight (at most step_deadline_s) before it exits
    floor = ValidatorSettings().step_deadline_s if "validator" in path.name else 6.0
    assert seconds(one["TimeoutStopSec"]) > floor


def _installed_copy(path: Path, folder: Path) -> Path:
    """``path`` with the console script and the environment file pointed into ``folder``
    (verify wants ExecStart's binary to exist), for ``instance`` when it is a template."""
    text = path.read_text(encoding="utf-8").replace(INSTALLED, str(DAGNET)).replace("/etc/dagnet/", f"{folder}/")
    name = path.name.replace("@.", "@a.")
    (folder / name).write_text(text, encoding="utf-8")
    for env in ("validator.env", "miner.env", "miner-a.env"):
        shutil.copy(SYSTEMD / env.replace("-a", ""), folder / env)
    return folder / name


@pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed (apt-get install systemd)"
)
@pytest.mark.parametrize("path", UNITS, ids=lambda p: p.name)
def test_systemd_analyze_verify_passes_without_a_warning(path: Path, tmp_path: Path) -> None:
    copy = _installed_copy(path, tmp_path)
    done = subprocess.run(
        ["systemd-analyze", "verify", str(copy)], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    # verify exits 0 on a line it ignores (a bad KillMode, a time it cannot parse): no output is the pass
    assert done.returncode == 0 and done.stderr.strip() == "" and done.stdout.strip() == "", done.stderr


@pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed (apt-get install systemd)"
)
def test_verify_would_catch_a_broken_unit(tmp_path: Path) -> None:
    broken = tmp_path / "broken.service"
    broken.write_text(
        _installed_copy(SYSTEMD / "dagnet-validator.service", tmp_path)
        .read_text()
        .replace("TimeoutStopSec=", "TimeoutStopSec=x"),
        encoding="utf-8",
    )
    done = subprocess.run(
        ["systemd-analyze", "verify", str(broken)], capture_output=True, text=True, timeout=120, check=False
    )
    assert "TimeoutStopSec" in done.stderr or "time value" in done.stderr


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed: the pm2 file cannot be loaded here")
def test_the_pm2_file_loads_with_the_same_stop_policy(tmp_path: Path) -> None:
    script = (
        "const c = require(process.argv[1]); console.log(JSON.stringify(c.apps.map("
        "a => [a.name, a.script, a.args[0], a.kill_signal, a.kill_timeout, a.autorestart, a.cwd])))"
    )
    done = subprocess.run(
        ["node", "-e", script, str(ROOT / "deploy" / "pm2" / "ecosystem.config.js")],
        env={**os.environ, "DAGNET_STATE_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    import json

    apps = {name: rest for name, *rest in json.loads(done.stdout)}
    timeouts = {path.name.split(".")[0]: seconds(unit(path)["Service"]["TimeoutStopSec"][0]) for path in UNITS}
    for name, role in (("dagnet-validator", "validator"), ("dagnet-miner", "miner")):
        script_path, command, kill_signal, kill_timeout, autorestart, cwd = apps[name]
        assert script_path == str(ROOT / ".venv" / "bin" / "dagnet") and command == role
        assert kill_signal == "SIGTERM" and autorestart and kill_timeout == timeouts[name] * 1000
        assert Path(cwd).is_dir() and Path(cwd).parent == tmp_path


# --- the neurons, started as the units start them --------------------------------


def _wallet(path: Path, name: str) -> None:
    done = subprocess.run(
        [str(DAGNET), "wallet", "create-dev", name, "--wallet.path", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr


async def _register(state: Path, wallets: Path, name: str) -> None:
    chain = SdkChain.open(Network("embedded", state), open_wallet(None, name, "default", str(wallets)), 1)
    try:
        await chain.register()
    finally:
        await chain.close()


def _start(path: Path, env: dict[str, str], workdir: Path) -> tuple[subprocess.Popen, float]:
    """The unit's ExecStart with ``env`` (its environment file, filled in), in its working
    directory, with its ``Environment=`` lines; and its TimeoutStopSec."""
    service = unit(path)["Service"]
    environment = dict(os.environ)
    for line in service.get("Environment", []):
        environment.update(pair.split("=", 1) for pair in shlex.split(line))
    environment["HOME"] = str(workdir.parent)  # the unit's /var/lib/dagnet
    environment.update(env)
    argv = exec_start(service, {**environment})
    assert argv[0] == INSTALLED
    argv[0] = str(DAGNET)
    workdir.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        argv, cwd=workdir, env=environment, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    return process, seconds(service["TimeoutStopSec"][0])


def _url(process: subprocess.Popen, seen: list[str]) -> str:
    for line in process.stderr:
        seen.append(line)
        if "listening on" in line:
            return line.split("listening on ", 1)[1].split()[0]
    raise AssertionError("exited before listening:\n" + "".join(seen))


def _stop(process: subprocess.Popen, timeout_s: float, seen: list[str]) -> float:
    """SIGTERM, as systemd sends it; how long the neuron took to exit (it must exit 0)."""
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        _, rest = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise AssertionError(f"still running {timeout_s:.0f} s after SIGTERM (TimeoutStopSec)") from None
    seen.append(rest)
    assert process.returncode == 0, "".join(seen)[-3000:]
    return time.monotonic() - started


def _poll(url: str, ok, timeout_s: float = 240.0) -> dict:
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = httpx.get(url, timeout=10).json()
        except httpx.HTTPError:
            pass
        else:
            if ok(last):
                return last
        time.sleep(0.5)
    raise AssertionError(f"{url}: never as expected; last {last}")


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """An embedded chain whose subnet expects a newer version_key than this code's, with
    a validator and a miner wallet registered."""
    folder = tmp_path_factory.mktemp("units")
    state, wallets = folder / "chain.sqlite", folder / "wallets"
    with running_node(state, block_time=0.5, weights_version=SCORING_VERSION + 1):
        for name in ("validator", "miner"):
            _wallet(wallets, name)
            asyncio.run(_register(state, wallets, name))
        yield state, wallets


def _env(template: str, state: Path, wallets: Path, **changes: str) -> dict[str, str]:
    return {
        **env_file(SYSTEMD / template),
        "BT_NETWORK": f"embedded:{state}",
        "BT_WALLET_PATH": str(wallets),
        **changes,
    }


@pytest.mark.e2e
def test_the_validator_runs_as_its_unit_starts_it_and_stops_on_sigterm(chain, tmp_path: Path) -> None:
    state, wallets = chain
    path = SYSTEMD / "dagnet-validator.service"
    env = _env("validator.env", state, wallets, DAGNET_FLAGS="--port 0 --poll 0.2")
    workdir = tmp_path / "validator"
    process, stop_s = _start(path, env, workdir)
    seen: list[str] = []
    try:
        url = _url(process, seen)
        assert f"version={package_version()} scoring_version={SCORING_VERSION}" in seen[-1]
        health = _poll(f"{url}/health", lambda h: h.get("upgrade") is not None)
        metrics = httpx.get(f"{url}/metrics", timeout=10).text
    finally:
        took = _stop(process, stop_s, seen)
    assert health["version"] == package_version() and health["scoring_version"] == SCORING_VERSION
    assert health["chain_weights_version"] == SCORING_VERSION + 1 and "upgrade dagnet" in health["upgrade"]
    assert "dagnet_validator_upgrade_needed 1.0" in metrics
    assert sum("the chain expects weights_version" in line for line in "".join(seen).splitlines()) == 1
    assert took < stop_s
    secret = _secret(workdir / "validator.sqlite")  # the state is in the unit's working directory

    # the upgrade path: stop (done), new code in place, start: the same state goes on
    process, stop_s = _start(path, env, workdir)
    seen = []
    try:
        _poll(f"{_url(process, seen)}/health", lambda h: "status" in h)
    finally:
        _stop(process, stop_s, seen)
    assert _secret(workdir / "validator.sqlite") == secret


def _secret(path: Path) -> bytes:
    state = ValidatorState(path)
    try:
        return state.instance_secret()
    finally:
        state.close()


@pytest.mark.e2e
@pytest.mark.parametrize("name", ["dagnet-miner.service", "dagnet-miner@.service"])
def test_a_miner_runs_as_its_unit_starts_it_and_stops_on_sigterm(chain, tmp_path: Path, name: str) -> None:
    state, wallets = chain
    env = _env("miner.env", state, wallets, DAGNET_PORT="0", DAGNET_FLAGS="--planner naive --sync-every 1")
    workdir = tmp_path / "miner-a"
    process, stop_s = _start(SYSTEMD / name, env, workdir)
    seen: list[str] = []
    try:
        url = _url(process, seen).replace("0.0.0.0", "127.0.0.1")
        assert f"version={package_version()} scoring_version={SCORING_VERSION}" in seen[-1]
        health = _poll(f"{url}/health", lambda h: h.get("status") == "ok")
    finally:
        took = _stop(process, stop_s, seen)
    assert health["version"] == package_version() and health["scoring_version"] == SCORING_VERSION
    assert not (workdir.parent / ".dagnet").exists()  # feedback goes to the working directory, not HOME
    assert took < stop_s
    assert "the chain expects weights_version" in "".join(seen)
