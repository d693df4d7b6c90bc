"""One cgroup per run: the run's whole process tree bounded together, memory and tasks.

Per-process rlimits bound each process; a run may fork, so only a group of its own bounds
the total. Where the run's group is made, first that works:

- cgroup v2: a child of this process's cgroup, or of its parent, whose
  ``cgroup.subtree_control`` already lists ``memory`` and ``pids`` (a delegated subtree:
  the validator or miner runs in a leaf of it, the runs become its siblings);
- cgroup v1 (and hybrid hosts): a child of this process's own ``memory`` and ``pids``
  cgroups, where this process may make one (root, as a rule).

Elsewhere there is none, and ``SandboxLimits.without_cgroup`` bounds the total instead
(docs/sandbox.md). The run enters its group before it execs anything: a shell writes its
own pid into each ``cgroup.procs``, then execs the run's command (:meth:`RunGroup.enter`).
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache

from .models import SandboxLimits

_PREFIX = "dagnet-sandbox-"
_EMPTY_S = 2.0  # how long a killed group may take to empty
_POLL_S = 0.01
SANDBOX_TASKS = 2
"""Tasks of bubblewrap's own (its parent and the namespace's init) counted by ``pids.max``."""
_ENTER = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 126; shift; n=$((n-1)); done; exec "$@"'


@dataclass(frozen=True)
class _Hierarchy:
    """Where run groups are made, and how one is configured, in one cgroup version."""

    version: int
    parents: tuple[str, ...]  # one directory per hierarchy the group spans (v1: memory, pids)

    def settings(self, limits: SandboxLimits) -> dict[str, str]:
        tasks = str(limits.max_processes + SANDBOX_TASKS)
        memory = str(limits.total_memory_bytes)
        if self.version == 2:
            return {"memory.max": memory, "memory.swap.max": "0", "pids.max": tasks}
        return {"memory.limit_in_bytes": memory, "memory.memsw.limit_in_bytes": memory, "pids.max": tasks}


class RunGroup:
    """The cgroup of one run (one directory per hierarchy)."""

    def __init__(self, dirs: list[str], version: int) -> None:
        self.dirs = dirs
        self.version = version

    def enter(self, argv: list[str]) -> list[str]:
        """``argv`` prefixed so that its first process joins this group before it execs."""
        procs = [os.path.join(path, "cgroup.procs") for path in self.dirs]
        return ["/bin/sh", "-c", _ENTER, "sh", str(len(procs)), *procs, *argv]

    def peak_bytes(self) -> int | None:
        """The most memory the run's processes held at once (None if unknown)."""
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        for path in self.dirs:
            value = _read(os.path.join(path, name))
            if value is not None:
                return int(value)
        return None

    def kill(self) -> None:
        """SIGKILL every process of the run until none is left (or a short deadline)."""
        if self.version == 2 and _write(os.path.join(self.dirs[0], "cgroup.kill"), "1"):
            self._wait_empty()
            return
        deadline = time.monotonic() + _EMPTY_S
        while (pids := self._pids()) and time.monotonic() < deadline:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(_POLL_S)

    def _wait_empty(self) -> None:
        deadline = time.monotonic() + _EMPTY_S
        while self._pids() and time.monotonic() < deadline:
            time.sleep(_POLL_S)

    def _pids(self) -> set[int]:
        found: set[int] = set()
        for path in self.dirs:
            text = _read(os.path.join(path, "cgroup.procs")) or ""
            found.update(int(line) for line in text.split())
        return found

    def remove(self) -> None:
        for path in self.dirs:
            try:
                os.rmdir(path)
            except OSError:
                pass  # still busy: a process outlived the kill's deadline


@contextmanager
def run_group(limits: SandboxLimits) -> Iterator[RunGroup | None]:
    """A fresh cgroup bounding one run to ``limits`` (its processes killed and the group
    removed on the way out), or None where this machine gives none."""
    hierarchy = _hierarchy()
    if hierarchy is None:
        yield None
        return
    group = _make(hierarchy, limits)
    try:
        yield group
    finally:
        if group is not None:
            group.kill()
            group.remove()


def cgroup_available() -> str:
    """``cgroup v2``, ``cgroup v1`` or ``none``: what bounds a run's total here."""
    hierarchy = _hierarchy()
    return "none" if hierarchy is None else f"cgroup v{hierarchy.version}"


def _make(hierarchy: _Hierarchy, limits: SandboxLimits) -> RunGroup | None:
    name = _PREFIX + secrets.token_hex(8)
    dirs: list[str] = []
    group = RunGroup(dirs, hierarchy.version)
    try:
        for parent in hierarchy.parents:
            path = os.path.join(parent, name)
            os.mkdir(path, 0o755)
            dirs.append(path)
        for setting, value in hierarchy.settings(limits).items():
            written = [_write(os.path.join(path, setting), value) for path in dirs]
            if (
                not any(written) and setting != "memory.memsw.limit_in_bytes"
            ):  # no swap accounting: no swap to escape to
                raise OSError(f"cannot set {setting}")
    except OSError:
        group.remove()
        return None
    return group


@cache
def _hierarchy() -> _Hierarchy | None:
    """Where this process may make run groups, probed once (by making and removing one)."""
    for hierarchy in (_v2(), _v1()):
        if hierarchy is not None and _probe(hierarchy):
            return hierarchy
    return None


def _probe(hierarchy: _Hierarchy) -> bool:
    group = _make(hierarchy, SandboxLimits())
    if group is None:
        return False
    group.remove()
    return True


def _v2() -> _Hierarchy | None:
    mount, own = _mounts().get("cgroup2"), _own_paths().get("")
    if mount is None or own is None:
        return None
    here = os.path.join(mount, own.lstrip("/"))
    for candidate in (here, os.path.dirname(here)):
        enabled = (_read(os.path.join(candidate, "cgroup.subtree_control")) or "").split()
        if {"memory", "pids"} <= set(enabled) and candidate.startswith(mount):
            return _Hierarchy(2, (candidate,))
    return None


def _v1() -> _Hierarchy | None:
    mounts, own = _mounts(), _own_paths()
    parents = []
    for controller in ("memory", "pids"):
        if controller not in mounts or controller not in own:
            return None
        parents.append(os.path.join(mounts[controller], own[controller].lstrip("/")))
    return _Hierarchy(1, tuple(parents))


def _own_paths() -> dict[str, str]:
    """This process's cgroup per v1 controller, and under ``""`` its v2 cgroup."""
    paths: dict[str, str] = {}
    for line in (_read("/proc/self/cgroup") or "").splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def _mounts() -> dict[str, str]:
    """Mount point per v1 controller, and of the v2 hierarchy under ``cgroup2``."""
    mounts: dict[str, str] = {}
    for line in (_read("/proc/self/mountinfo") or "").splitlines():
        fields = line.split()
        separator = fields.index("-")
        fstype, options = fields[separator + 1], fields[separator + 3].split(",")
        if fields[3] != "/":
            continue  # a bind of part of a hierarchy: own paths do not map onto it
        if fstype == "cgroup2":
            mounts.setdefault("cgroup2", fields[4])
        elif fstype == "cgroup":
            for option in options:
                mounts.setdefault(option, fields[4])
    return mounts


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as handle:
            return handle.read()
    except (OSError, ValueError):
        return None


def _write(path: str, value: str) -> bool:
    try:
        with open(path, "w", encoding="ascii") as handle:
            handle.write(value)
    except OSError:
        return False
    return True
