"""A process's family, read from /proc: to check that nothing of it outlives it.

    env = marked_env(marker)                 # start the process with this environment
    family = descendants(process.pid)        # just before killing it
    survivors = outliving(family | marked(marker), within_s=5.0)

``marked`` finds the processes that inherited the marker, even those re-parented to init
after the kill; ``descendants`` adds those that run with an environment of their own (the
sandbox's). A zombie runs nothing and counts as gone (this machine's init may never reap it).
"""

from __future__ import annotations

import os
import time

MARK = "DAGNET_TEST_FAMILY"
POLL_S = 0.05


def marked_env(marker: str) -> dict[str, str]:
    return {**os.environ, MARK: marker}


def descendants(root: int) -> set[int]:
    """Every live process below ``root`` now."""
    children: dict[int, list[int]] = {}
    for pid in _pids():
        stat = _stat(pid)
        if stat is not None:
            children.setdefault(stat[1], []).append(pid)
    found, frontier = set(), [root]
    while frontier:
        for child in children.get(frontier.pop(), []):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return found


def children(parent: int) -> set[int]:
    """The live processes whose parent is ``parent`` now."""
    return {pid for pid in _pids() if (stat := _stat(pid)) is not None and stat[1] == parent and stat[0] != "Z"}


def marked(marker: str) -> set[int]:
    """Every process whose environment carries ``marker`` (see :func:`marked_env`)."""
    needle = f"{MARK}={marker}".encode()
    found = set()
    for pid in _pids():
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                if needle in handle.read().split(b"\0"):
                    found.add(pid)
        except OSError:
            continue
    return found


def alive(pids: set[int]) -> set[int]:
    """Those of ``pids`` still running (not gone, not a zombie)."""
    return {pid for pid in pids if (stat := _stat(pid)) is not None and stat[0] != "Z"}


def outliving(pids: set[int], *, within_s: float) -> dict[int, str]:
    """Polls until none of ``pids`` runs, for at most ``within_s``: ``{pid: command line}`` of
    those still running then (empty when all ended in time)."""
    deadline = time.monotonic() + within_s
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    return {pid: cmdline(pid) for pid in alive(pids)}


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def zombie_children(pid: int) -> list[int]:
    """The children of ``pid`` that have exited and wait for it to reap them."""
    found = []
    for child in _pids():
        stat = _stat(child)
        if stat is not None and stat[1] == pid and stat[0] == "Z":
            found.append(child)
    return found


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _stat(pid: int) -> tuple[str, int] | None:
    """``(state, ppid)``, or None once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    return fields[0].decode(), int(fields[1])
