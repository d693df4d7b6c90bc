"""Nothing a sandboxed program reads varies by run: the same program prints the same bytes.

The program reads the wall clock every usual way, the ``/proc`` files that tell one boot,
moment or machine from another, the CPU count, the random module, the
order of a set of strings and its own environment. It runs twice in this process (no
sleep between) and once from a fresh process: the three outputs are identical.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sandbox import isolation_available, run_python

pytestmark = pytest.mark.skipif(isolation_available() != "bwrap", reason="the constant machine is bubblewrap's")

REPO = Path(__file__).resolve().parents[2]
PROGRAM = """
import datetime, os, random, time
print(time.time(), time.time_ns(), time.clock_gettime_ns(time.CLOCK_REALTIME))
print(datetime.datetime.now(), datetime.datetime.utcnow(), datetime.date.today(), repr(datetime.datetime.today()))
print(time.ctime(), time.strftime("%Y-%m-%d %H:%M:%S"), time.localtime()[:6], time.gmtime()[:6])
for name in ["/proc/uptime", "/proc/sys/kernel/random/boot_id", "/proc/loadavg", "/proc/cpuinfo", "/proc/stat",
             "/proc/meminfo"]:
    print(name, open(name).read())
print(os.cpu_count(), os.getcwd(), sorted(os.environ.items()))
print(random.random(), list({"apple", "pear", "plum", "fig", "kiwi"}), hash("dagnet"))
"""


def run_once() -> str:
    result = run_python({"main.py": PROGRAM}, ["main.py"])
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_same_program_prints_the_same_bytes_on_every_run() -> None:
    first, second = run_once(), run_once()
    elsewhere = subprocess.run(
        [sys.executable, "-c", "from test_sandbox_steady import run_once; print(run_once(), end='')"],
        cwd=REPO / "tests" / "sandbox",
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    ).stdout
    assert first == second == elsewhere
    assert "1700000000.0 1700000000000000000 1700000000000000000" in first
