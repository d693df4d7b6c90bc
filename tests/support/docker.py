"""A Docker engine for the tests that need one, stopped again if the session started it.

:func:`docker_engine` (a session fixture) runs ``scripts/docker-engine``, which starts
``dockerd`` only when no engine answers and then says so with its pid; that engine is
stopped when the session ends (SIGTERM, then SIGKILL after :data:`STOP_GRACE_S`). An engine
that was already running is left as it was. Images the tests build carry :data:`LABEL`, so
``scripts/clean-test-images`` removes them.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LABEL = "dagnet.test-suite=1"
"""On every image the suite builds (the base carries it; images built on it inherit it)."""
STOP_GRACE_S = 60.0
_STARTED = re.compile(r"started dockerd, pid (\d+)")


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[None]:
    if os.geteuid() != 0:
        pytest.skip("starting a Docker engine needs root (scripts/docker-engine)")
    done = subprocess.run(
        [str(ROOT / "scripts" / "docker-engine")], capture_output=True, text=True, timeout=600, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"no Docker engine could be started here: {done.stderr.strip()[-500:]}")
    started = _STARTED.search(done.stdout)
    try:
        yield
    finally:
        if started:
            stop(int(started.group(1)))


def stop(pid: int, grace_s: float = STOP_GRACE_S) -> bool:
    """SIGTERM ``pid`` (not a child of ours: it is gone when signal 0 fails), SIGKILL it if it
    outlives ``grace_s``; whether it ended on the SIGTERM."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.2)  # polling another session's process: no wait() reaches it
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return True
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie still answers signal 0: it has ended
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False
