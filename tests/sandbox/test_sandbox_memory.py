"""One sandboxed call's whole process tree is bounded together, however many processes it forks.

The attack: a call forks 8 children that each fill 400 MiB (3.2 GiB of host memory before
the bound). The memory it holds is measured from outside, as the sum of the proportional
anonymous set sizes of its processes, sampled while it runs; it stays within the call's documented
total (``SandboxLimits.total_memory_bytes``, 1 GiB), on the paths that run untrusted code:
``python_exec`` (the validator's owned execution and a miner's ``NodeSynapse``) and the
code judge's calls, with a cgroup of the run's own and without one.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

from sandbox import SandboxLimits, cgroup, isolation_available
from sandbox.calls import Call, call_function
from scoring.quality.code import JUDGING
from subnets.base import ToolContext, ToolError
from subnets.python_exec import make_python_exec

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(isolation_available() == "none", reason="no sandbox on this machine"),
]

LIMITS = SandboxLimits()
CHILDREN, CHILD_MIB = 8, 400
FORKER = """
import os, sys
CHILD = "import time; block = b'\\x01' * ({mib} << 20); time.sleep(2)  # {token}"
def hog():
    kids = []
    for _ in range({children}):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            try:
                os.execv(sys.executable, [sys.executable, "-c", CHILD])
            finally:
                os._exit(1)
        kids.append(pid)
    return [os.waitpid(kid, 0)[1] for kid in kids]
"""
"""The children exec so that their command line carries the token: found from outside."""


def _held(token: bytes) -> dict[int, int]:
    """The processes whose command line carries ``token``, each with the anonymous memory
    it holds (proportional: a page shared by forks counts once)."""
    held = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if token not in (entry / "cmdline").read_bytes():
                continue
            rollup = (entry / "smaps_rollup").read_text().splitlines()
        except OSError:
            continue
        held[int(entry.name)] = sum(int(line.split()[1]) * 1024 for line in rollup if line.startswith("Pss_Anon:"))
    return held


def _group_peak(pids: Iterable[int]) -> int:
    """The kernel's high-water mark of the sandbox run groups ``pids`` are in (0 where none
    is read; a process not yet in its run's group, such as the shell that enters it, is in
    the host's): what a run's group held at once at its most, counted by the kernel as it
    charges pages (:meth:`cgroup.RunGroup.peak_bytes`), so no sample can miss it."""
    mounts, peak = cgroup._mounts(), 0
    for pid in pids:
        try:
            lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            _, controllers, path = line.split(":", 2)
            if not controllers:
                version, mount = 2, mounts.get("cgroup2")
            elif "memory" in controllers.split(","):
                version, mount = 1, mounts.get("memory")
            else:
                continue
            if mount and Path(path).name.startswith(cgroup._PREFIX):  # a run's own group
                group = cgroup.RunGroup([str(Path(mount, path.lstrip("/")))], version)
                peak = max(peak, group.peak_bytes() or 0)
    return peak


@contextlib.contextmanager
def peak_memory(token: str) -> Iterator[list[int]]:
    """Samples the memory of ``token``'s processes until the block ends; yields [peak,
    the peak of their memory cgroups (:func:`_group_peak`)].

    Each sample reads every process twice and sums, over those read both times, the lower
    of the two readings: each of them was alive when the first scan ended and held at least
    that much then (a child only grows until it dies; a fork shares its parent's pages
    until it execs, and the lower reading counts them once), so the sum is memory held at
    once, never a process's memory counted again in the one it handed it to. A process
    that came or went between the scans leaves the sample without it rather than dropping
    the sample: once the bound kills children they die and are forked all the time, and on
    a loaded machine a scan is slow enough that few whole samples would be left (a run
    at load 5 kept none with a child full: a peak of 359 MiB)."""
    peak, done = [0, 0], threading.Event()

    def sample() -> None:
        while not done.wait(0.02):
            first, second = _held(token.encode()), _held(token.encode())
            peak[0] = max(peak[0], sum(min(memory, second[pid]) for pid, memory in first.items() if pid in second))
            peak[1] = max(peak[1], _group_peak(second))

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        yield peak
    finally:
        done.set()
        sampler.join()


def through_python_exec(source: str) -> None:
    tool = make_python_exec(LIMITS)
    ctx = ToolContext(task_id="t", node_id="py", attempt=1, timeout_seconds=20.0)
    with contextlib.suppress(ToolError):
        asyncio.run(tool({"code": source + "print(hog())\n"}, ctx))


def through_the_judge(source: str) -> None:
    call_function(source, "hog", [Call()], budget=JUDGING, limits=LIMITS)


@pytest.fixture(params=["cgroup", "no cgroup"])
def bound(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "cgroup" and cgroup.cgroup_available() == "none":
        pytest.skip("this machine gives the sandbox no cgroup")
    if request.param == "no cgroup":
        monkeypatch.setattr(cgroup, "_hierarchy", lambda: None)
    return request.param


@pytest.mark.parametrize("path", [through_python_exec, through_the_judge], ids=["python_exec", "judge"])
def test_a_call_forking_8_children_of_400_mib_holds_at_most_its_total(path: Callable[[str], None], bound: str) -> None:
    token = f"dagnet-hog-{uuid.uuid4().hex}"
    with peak_memory(token) as peak:
        path(FORKER.format(token=token, children=CHILDREN, mib=CHILD_MIB))
    if bound == "cgroup":  # the children filled memory up to the group's bound: the kernel counted it
        assert peak[1] > 400 * 2**20, peak
    assert peak[0] <= LIMITS.total_memory_bytes, f"{peak[0] / 2**20:.0f} MiB held at once"


def test_without_a_cgroup_processes_times_their_memory_fit_the_total() -> None:
    fallback = LIMITS.without_cgroup()
    assert fallback.max_processes * fallback.memory_bytes + fallback.max_disk_bytes <= LIMITS.total_memory_bytes
    assert fallback.max_processes >= 2  # the judge's harness and one call
