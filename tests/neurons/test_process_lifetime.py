"""Nothing a neuron starts outlives it, and nothing it starts is left a zombie (sandbox/lifetime.py).

Real processes: a `dagnet miner` with two uvicorn workers, their planning processes and a
python_exec run in flight, killed with SIGKILL; the same miner stopped with SIGTERM; and
sandbox runs under a parent that, like a supervisor or a container's PID 1 without an init,
adopts orphans and never reaps them. The validator's kill -9 is in test_validator_restart.py.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest

from support.family import children, cmdline, descendants, marked, marked_env, outliving
from support.keys import dev_keypair, signed_headers

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
METAGRAPH = ROOT / "examples" / "metagraph.json"  # validator //Alice, miner //Bob
START_S = 120.0
"""How long a miner may take to serve (imports of two workers on a loaded machine)."""


def _miner(tmp_path: Path, marker: str, *, workers: int, under: list[str] = ()) -> tuple[subprocess.Popen, str]:
    """A served `dagnet miner` (python_exec on sn1), started by the command ``under`` if any, and its URL."""
    process = subprocess.Popen(
        [
            *under,
            sys.executable,
            "-m",
            "neurons.miner",
            "--dev-key",
            "//Bob",
            "--metagraph-file",
            str(METAGRAPH),
            "--port",
            "0",
            "--set",
            f"workers={workers}",
            "--set",
            'serve.sn1=["python_exec"]',
            "--set",
            f"feedback_db={json.dumps(str(tmp_path / 'feedback.sqlite'))}",
            "--set",
            f"nonce_db={json.dumps(str(tmp_path / 'nonces.sqlite'))}",
        ],
        cwd=ROOT,
        env=marked_env(marker),
        stdout=subprocess.PIPE if under else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = _listening(process)
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=5).status_code < 500:
                return process, url
        except httpx.HTTPError:
            pass
        assert process.poll() is None, "the miner exited while starting"
        time.sleep(0.2)
    raise AssertionError(f"the miner did not serve within {START_S:g}s")


def _listening(process: subprocess.Popen) -> str:
    assert process.stderr is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stderr, selectors.EVENT_READ)
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline and selector.select(deadline - time.monotonic()):
            line = process.stderr.readline().decode()
            if "listening on " in line:
                threading.Thread(target=process.stderr.read, daemon=True).start()  # keep the pipe drained
                return line.split("listening on ")[1].split()[0]
            assert line, "the miner exited before listening"
    raise AssertionError("the miner never said where it listens")


def _python_exec(url: str, code: str) -> httpx.Response:
    body = json.dumps(
        {"task_id": "t1", "node_id": "n1", "subnet": "sn1", "action": "python_exec", "params": {"code": code}}
    ).encode()
    headers = signed_headers(dev_keypair("Alice"), dev_keypair("Bob"), "/NodeSynapse", body)
    return httpx.post(url + "/NodeSynapse", content=body, headers=headers, timeout=60)


def _running_program(pids: set[int]) -> bool:
    """Whether the sandboxed program itself runs among ``pids`` (the launcher has exec'd it,
    so bwrap and its namespace's init are up): not only a command line that names it."""
    return any(cmdline(pid).endswith(" -s -P -B main.py") for pid in pids)


def _spawned(pids: set[int]) -> int:
    """How many of ``pids`` are multiprocessing's spawned processes (workers, planners)."""
    return sum("multiprocessing.spawn" in cmdline(pid) for pid in pids)


def _quietly(call: callable, *args: object) -> None:
    """``call`` whose failure is expected: the miner is killed while it answers."""
    try:
        call(*args)
    except httpx.HTTPError:
        pass


def _until(found: callable, within_s: float = 60.0) -> None:
    deadline = time.monotonic() + within_s
    while not found():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.05)


def test_kill_9_of_a_miner_leaves_none_of_its_processes(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    process, url = _miner(tmp_path, marker, workers=2)
    assert _python_exec(url, "print(6 * 7)").status_code == 200  # the sandbox works here
    running = threading.Thread(target=_quietly, args=(_python_exec, url, "import time; time.sleep(8)"), daemon=True)
    running.start()
    # Every process up before the kill: the sandboxed program, and uvicorn's two workers with
    # each one's two planning processes (a loaded machine starts the last ones late: 4 of 6
    # were up in one run when the program already ran).
    _until(lambda: _running_program(descendants(process.pid)) and _spawned(descendants(process.pid)) == 2 + 2 * 2)
    family = descendants(process.pid)
    started = [cmdline(pid) for pid in family]
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    survivors = outliving(family | marked(marker), within_s=5.0)
    # uvicorn's two workers and each one's two planning processes (forks: the same command line)
    assert sum("multiprocessing.spawn" in line for line in started) == 2 + 2 * 2, started
    assert sum(line.startswith("bwrap") for line in started) == 2, started  # bwrap and its namespace's init
    assert survivors == {}


def test_a_sigtermed_miner_exits_0_and_its_sandbox_runs_leave_no_zombie(tmp_path: Path) -> None:
    """Under a parent that never reaps what it adopts, the miner's python_exec runs orphan
    nothing there (it is their subreaper and reaps them), and SIGTERM ends it with exit 0."""
    marker = uuid.uuid4().hex
    adopter, url = _miner(tmp_path, marker, workers=1, under=[sys.executable, "-c", ADOPTER])
    assert [_python_exec(url, f"print({i})").status_code for i in range(3)] == [200] * 3
    (miner,) = children(adopter.pid)
    family = descendants(miner)
    os.kill(miner, signal.SIGTERM)
    out, _ = adopter.communicate(timeout=60)
    # exit 143 before (uvicorn re-raised the SIGTERM it stopped on), and a bwrap per run left here
    assert _verdict(out.decode()) == (0, 0, [])
    assert outliving(family | marked(marker), within_s=5.0) == {}


ADOPTER = """
import ctypes, os, subprocess, sys, time
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER, and it never reaps an adoptee
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
child.wait()
time.sleep(0.1)  # a grandchild orphaned at the child's very end has been handed over by now
zombies = []
for name in os.listdir("/proc"):
    try:
        stat = open("/proc/%s/stat" % name).read()
    except OSError:
        continue
    fields = stat[stat.rfind(")") + 2 :].split()
    if fields[0] == "Z" and int(fields[1]) == os.getpid():
        zombies.append(stat[stat.find("(") + 1 : stat.rfind(")")])
print(child.returncode, len(zombies), sorted(set(zombies)))
"""
"""Runs a command under a subreaper that never reaps what it adopts, as a supervisor or a
container's PID 1 without an init would; prints the command's exit code and the zombies left."""


RUNS = """
import asyncio, sys, time
from sandbox.lifetime import REAP_S, reap_adopted
from subnets.base import ToolContext
from subnets.python_exec import python_exec_spec
if sys.argv[2] == "reaping":
    assert reap_adopted()
tool = python_exec_spec().fn
for i in range(int(sys.argv[1])):
    result = asyncio.run(tool({"code": "print(%d)" % i}, ToolContext("t", "n", 1, 10.0)))
    assert result.output.text.strip() == str(i), result
time.sleep(3 * REAP_S)  # the last run's adoptee is reaped within REAP_S
"""


def _adopted_zombies(runs: int, mode: str) -> tuple[int, list[str]]:
    """How many zombies ``runs`` python_exec calls leave with the adopter, and their names."""
    done = subprocess.run(
        [sys.executable, "-c", ADOPTER, sys.executable, "-c", RUNS, str(runs), mode],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    code, count, names = _verdict(done.stdout)
    assert code == 0, done.stderr[-2000:]
    return count, names


def _verdict(printed: str) -> tuple[int, int, list[str]]:
    code, count, names = printed.split(maxsplit=2)
    return int(code), int(count), json.loads(names.replace("'", '"'))


def test_python_exec_runs_leave_no_zombie_behind_the_reaper() -> None:
    """bubblewrap's namespace init outlives the outer bwrap that reported its exit: without
    :func:`reap_adopted`, each run hands one exited bwrap to the nearest subreaper (the probe
    one more); with it, the process running the sandbox takes and reaps them."""
    assert _adopted_zombies(5, "reaping") == (0, [])
    count, names = _adopted_zombies(5, "plain")
    assert names == ["bwrap"] and count >= 5
