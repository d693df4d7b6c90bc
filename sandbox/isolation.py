"""The isolation layers this machine can give, strongest first, and their commands.

- ``bwrap``: bubblewrap (see :mod:`sandbox.bwrap`) plus the launcher's rlimits
  and, as root, the drop to an unprivileged uid of the run's own (``RUN_UIDS``).
- fallback ``rlimits+netns[+nobody]``: ``unshare`` gives a fresh network and pid
  namespace (the whole run dies with it); as root the launcher drops to such a uid.
- fallback ``rlimits[+nobody]``: only rlimits, the uid drop and a process group.
- ``none``: as root, but an unprivileged uid cannot run the interpreter: code is refused.

What the fallbacks do not protect is listed in ``docs/sandbox.md``.
"""

from __future__ import annotations

import json
import math
import os
import secrets
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from .bwrap import STAGE_IN, WORKDIR, bwrap_argv
from .interpreter import interpreter
from .models import SandboxLimits
from .steady import ENV as STEADY_ENV

Kind = Literal["bwrap", "unshare", "plain", "none"]

_PATH = "/usr/local/bin:/usr/bin:/bin"
RUN_UIDS = range(1_000_000_000, 2_000_000_000)
"""As root, each run drops to a uid drawn from here (no account owns them)."""


@dataclass(frozen=True)
class Isolation:
    name: str
    kind: Kind
    as_root: bool = False

    def run_uid(self) -> int | None:
        """The host uid a run drops to when we are root, drawn fresh for each run; else None.

        A uid of its own makes RLIMIT_NPROC count only that run's tasks: a fork bomb in
        one run cannot use up the process limit of another running beside it.
        """
        return RUN_UIDS[secrets.randbelow(len(RUN_UIDS))] if self.as_root else None

    def command(self, host_dir: str, args: list[str], limits: SandboxLimits, uid: int | None) -> list[str]:
        """The full argv: isolation prefix, launcher, then ``python -I -B <args>``, run as ``uid``."""
        config = {
            "rlimits": _rlimits(limits, self._nproc_in_use(uid)),
            "uid": uid,
            "stage": [STAGE_IN, WORKDIR] if self.kind == "bwrap" else None,
        }
        launcher = [interpreter(), "-I", "-B", "-c", _launcher_source(), json.dumps(config)]
        return [*self._prefix(host_dir, limits), *launcher, *args]

    def env(self, host_dir: str) -> dict[str, str]:
        """A clean environment: nothing of the caller's leaks in."""
        home = WORKDIR if self.kind == "bwrap" else host_dir
        return {"PATH": _PATH, "HOME": home, "TMPDIR": "/tmp", "LANG": "C.UTF-8", **STEADY_ENV}

    def _prefix(self, host_dir: str, limits: SandboxLimits) -> list[str]:
        if self.kind == "bwrap":
            return bwrap_argv(host_dir, as_root=self.as_root, tmp_bytes=limits.max_disk_bytes)
        if self.kind == "unshare":
            user = [] if self.as_root else ["--user"]
            return ["unshare", *user, "--net", "--pid", "--fork", "--kill-child", "--"]
        return []

    def _nproc_in_use(self, uid: int | None) -> int:
        """Tasks already counted against the run's RLIMIT_NPROC before it starts.

        The limit counts every task of the real uid on the host unless the run has
        a user namespace of its own, so headroom is added for what already exists.
        """
        if self.kind != "plain" and not self.as_root:
            return 0
        return _count_tasks(os.getuid() if uid is None else uid)


NONE = Isolation("none", "none")


def candidates(*, as_root: bool) -> list[Isolation]:
    """Every layer worth probing on this machine, strongest first."""
    suffix = "+nobody" if as_root else ""
    return [
        Isolation("bwrap", "bwrap", as_root),
        Isolation(f"rlimits+netns{suffix}", "unshare", as_root),
        Isolation(f"rlimits{suffix}", "plain", as_root),
    ]


def _rlimits(limits: SandboxLimits, nproc_in_use: int) -> dict[str, list[int]]:
    cpu = max(1, math.ceil(limits.cpu_seconds))
    return {
        "RLIMIT_CPU": [cpu, cpu + 1],  # SIGXCPU at the soft limit, SIGKILL one second later
        "RLIMIT_AS": [limits.memory_bytes] * 2,
        "RLIMIT_NPROC": [nproc_in_use + limits.max_processes] * 2,
        "RLIMIT_FSIZE": [limits.max_file_bytes] * 2,
        "RLIMIT_NOFILE": [limits.max_open_files] * 2,
        "RLIMIT_CORE": [0, 0],
    }


def _count_tasks(uid: int) -> int:
    """Threads of every process whose owner is ``uid`` (RLIMIT_NPROC counts threads)."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid == uid:
                total += len(os.listdir(f"/proc/{entry.name}/task"))
        except OSError:  # the process exited while we looked
            continue
    return total


@cache
def _launcher_source() -> str:
    return (Path(__file__).parent / "_launcher.py").read_text(encoding="utf-8")
