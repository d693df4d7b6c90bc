"""README's validator recipe, run exactly as printed: a chain, three wallets, two miners
and a validator as separate processes on the embedded chain, no tool provider anywhere,
until the validator's weights are on chain and the good miner leads in the first epoch
that pays anyone, with no refusal of the permit-less validator charged to a miner."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

# Binds the host ports the page names (9100, 8091, …): one test at a time among those that do.
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("host-ports")]


ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- recipe: validator -->"
SETTLE_S = 240
"""How long the recipe's processes may take to put weights on chain and an epoch after them."""


def recipe() -> str:
    """The fenced bash block right after the recipe marker in README.md."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    after = text[text.index(MARKER) + len(MARKER) :]
    match = re.match(r"\s*```bash\n(.*?)\n```", after, re.S)
    assert match, "the recipe marker is not followed by a bash block"
    return match.group(1)


def _status(env: dict[str, str], cwd: Path) -> dict | None:
    done = subprocess.run(
        [shutil.which("dagnet", path=env["PATH"]), "chain", "status", "--json"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return json.loads(done.stdout) if done.returncode == 0 else None


def _uid_of(status: dict, hotkey: str) -> dict:
    (neuron,) = [n for n in status["neurons"] if n["hotkey"] == hotkey]
    return neuron


def _hotkey(home: Path, wallet: str) -> str:
    path = home / ".bittensor" / "wallets" / wallet / "hotkeys" / "default"
    if path.exists():
        return json.loads(path.read_text())["ss58Address"]
    pub = home / ".bittensor" / "wallets" / wallet / "hotkeys" / "defaultpub.txt"
    return json.loads(pub.read_text())["ss58Address"]


def _refusals_in_the_window(state: Path) -> list[str]:
    """The reasons of the recorded outcomes that are a miner refusing the validator itself."""
    with contextlib.closing(sqlite3.connect(f"file:{state}?mode=ro", uri=True)) as db:
        reasons = [row[0] for row in db.execute("SELECT reason FROM executions WHERE reason IS NOT NULL")]
    return [r for r in reasons if "no_validator_permit" in r or '"unregistered"' in r]


def test_the_readme_validator_recipe_puts_weights_on_chain(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "HOME": str(home), "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("BT_NETWORK", None)
    script = tmp_path / "recipe.sh"
    script.write_text("set -euo pipefail\n" + recipe() + "\n")
    log = (tmp_path / "recipe.log").open("w")
    shell = subprocess.Popen(
        ["bash", str(script)], cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        assert shell.wait(timeout=180) == 0, (tmp_path / "recipe.log").read_text()[-3000:]
        env["BT_NETWORK"] = "embedded:dev.sqlite"
        validator, good, naive = (_hotkey(home, w) for w in ("validator", "miner1", "miner2"))
        deadline = time.monotonic() + SETTLE_S
        status = None
        while time.monotonic() < deadline:
            status = _status(env, tmp_path)
            if status and _uid_of(status, good)["incentive"] > 0:
                break
            time.sleep(2)  # polling the chain's head: blocks are 1 s apart
        assert status is not None
        refusals = _refusals_in_the_window(tmp_path / "validator.sqlite")
        assert refusals == [], refusals  # the validator had no permit at first: those refusals are no score
        assert _uid_of(status, good)["incentive"] > _uid_of(status, naive)["incentive"], status
        assert _uid_of(status, validator)["dividends"] > 0, status
        health = httpx.get("http://127.0.0.1:9100/health", timeout=10).json()
        assert health["last_weights_block"] is not None, health
    finally:
        os.killpg(shell.pid, signal.SIGTERM)
        try:
            shell.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(shell.pid, signal.SIGKILL)
        log.close()
    logs = (tmp_path / "recipe.log").read_text()
    assert "set_aside" not in logs and "quarantine" not in logs, logs[-3000:]
    assert "Traceback" not in logs, logs[-3000:]
