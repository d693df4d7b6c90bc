"""docs/operating.md's testnet walk-through, run where no chain answers: every command of
its testnet block is refused with one ``error:`` line naming the chain and exit 2, well
within a minute; the miner, which keeps serving without its chain, says on ``/health``
why it is not ready. (On the testnet itself the same commands register, stake and run.)"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from support import doccmds

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("host-ports")]  # the miner's and validator's ports as written

PAGE = doccmds.ROOT / "docs" / "operating.md"
BIN = Path(sys.executable).parent
REFUSED_WITHIN_S = 60.0
"""Generous on purpose: the refusal itself is a failed name lookup and a few quick retries
(about 8 s on an idle machine); the rest is the interpreter starting on a loaded one."""
UNREACHABLE = "cannot reach the chain at test (wss://test.finney.opentensor.ai:443)"


def _testnet_commands() -> list[str]:
    (block,) = [b for b in doccmds.blocks(PAGE) if b.directive.startswith("skip needs the testnet")]
    return doccmds.commands(block.text)


COMMANDS = _testnet_commands()
SETUP = [c for c in COMMANDS if c.startswith("export ")]
NEURONS = [c for c in COMMANDS if c.startswith("dagnet miner ")]
REFUSED = [c for c in COMMANDS if c not in SETUP and c not in NEURONS]


def test_the_walkthrough_block_is_what_this_test_expects() -> None:
    assert len(SETUP) == 1 and len(NEURONS) == 1 and len(REFUSED) == 5
    assert all("--network test" in c for c in REFUSED + NEURONS)
    assert any(c.startswith("dagnet validator ") for c in REFUSED)


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> dict[str, str]:
    """A HOME with the walk-through's two wallets, made as the page makes them."""
    folder = tmp_path_factory.mktemp("operator")
    env = {**os.environ, "HOME": str(folder), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    for block in doccmds.blocks(PAGE):
        if block.language == "bash" and "dagnet wallet create-dev" in block.text:
            for command in doccmds.commands(block.text):
                done = subprocess.run(
                    command, shell=True, cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False
                )
                assert done.returncode == 0, done.stderr
    return env


def _bash(command: str, env: dict[str, str], **kwargs) -> subprocess.Popen:
    script = "\n".join([*SETUP, "exec " + command])
    return subprocess.Popen(
        ["bash", "-c", script],
        cwd=env["HOME"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **kwargs,
    )


@pytest.mark.parametrize("command", REFUSED, ids=lambda c: " ".join(shlex.split(c)[:3]))
def test_a_testnet_command_is_refused_with_one_line_where_no_chain_answers(command: str, home) -> None:
    started = time.monotonic()
    process = _bash(command, home)
    out, err = process.communicate(timeout=300)
    took = time.monotonic() - started
    assert process.returncode == 2, err
    assert err.count("\n") == 1 and err.startswith("error: ") and UNREACHABLE in err, err
    assert out == ""
    assert took < REFUSED_WITHIN_S, f"refused after {took:.0f} s"


def test_the_miner_keeps_serving_and_says_why_it_is_not_ready(home) -> None:
    (command,) = NEURONS
    port = shlex.split(command)[shlex.split(command).index("--port") + 1]
    process = _bash(command, home)
    try:
        deadline, body = time.monotonic() + 240, None
        while time.monotonic() < deadline and process.poll() is None:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
            except httpx.HTTPError:
                time.sleep(0.5)
                continue
            body = response.json()
            if response.status_code == 503 and UNREACHABLE in (body.get("reason") or ""):
                break
            time.sleep(0.5)
        assert body is not None and UNREACHABLE in (body.get("reason") or ""), (body, process.poll())
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.communicate(timeout=60)
    assert process.returncode == 0
