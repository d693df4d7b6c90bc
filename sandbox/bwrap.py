"""The bubblewrap command line: what a sandboxed program sees of the host.

The host root is bound read-only. Directories that commonly hold secrets or
sockets (``/tmp``, ``/var/tmp``, ``/run``, ``/root``, ``/home`` and the caller's
home) are hidden behind empty tmpfs mounts, then the interpreter's own directories
are bound back read-only so ``sys.executable`` and its site-packages still work.
``/tmp`` is the only writable place: a private, size-limited tmpfs holding the work
dir. Nothing the program writes reaches the host.
"""

from __future__ import annotations

import os
import pwd
import stat
import sys
from pathlib import PurePosixPath

NOBODY = 65534
STAGE_IN = "/tmp/.dagnet-in"
"""Where the host work dir is bound read-only; the launcher copies it to WORKDIR."""
WORKDIR = "/tmp/work"

_HIDDEN = ("/tmp", "/var/tmp", "/run", "/root", "/home")
_PRIVATE_TMP = "/tmp"


def bwrap_argv(host_dir: str, *, as_root: bool, tmp_bytes: int) -> list[str]:
    """The ``bwrap ... --`` prefix that runs a command in a fresh sandbox.

    As root no user namespace is made (uid 0 inside one is still root on the host
    for RLIMIT_NPROC), so the launcher keeps CAP_SETUID/CAP_SETGID just long
    enough to drop to ``nobody``. Otherwise an unprivileged user namespace maps the
    caller to ``nobody`` and RLIMIT_NPROC counts only the sandbox's own processes.
    """
    exposed = _interpreter_dirs()
    masks = _masks(exposed, as_root=as_root)
    argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    argv += _hide(masks, tmp_bytes)
    argv += _expose(exposed, masks)
    argv += ["--ro-bind", host_dir, STAGE_IN]
    for mask in masks:
        if mask != _PRIVATE_TMP:
            argv += ["--remount-ro", mask]
    argv += ["--remount-ro", "/dev"]
    argv += _namespaces(as_root)
    argv += ["--die-with-parent", "--new-session", "--chdir", "/", "--"]
    return argv


def _namespaces(as_root: bool) -> list[str]:
    if as_root:
        return [
            "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
        ]  # fmt: skip
    return [
        "--unshare-user", "--unshare-all", "--disable-userns",
        "--uid", str(NOBODY), "--gid", str(NOBODY),
    ]  # fmt: skip


def _interpreter_dirs() -> list[str]:
    """The directories the interpreter needs, as given and with symlinks resolved."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    roots.add(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))
    roots |= {os.path.realpath(root) for root in roots}
    return _outermost(root for root in roots if os.path.isdir(root))


def _masks(exposed: list[str], *, as_root: bool) -> list[str]:
    """Directories to hide. As root, also the first ancestor of an exposed path that
    ``nobody`` could not traverse: a tmpfs there makes the path reachable."""
    candidates = [*_HIDDEN, pwd.getpwuid(os.getuid()).pw_dir]
    masks = [path for path in candidates if os.path.isdir(path) and not os.path.islink(path)]
    masks = [path for path in masks if path != "/"]
    if as_root:
        for path in exposed:
            blocked = _first_closed_ancestor(path)
            if blocked is not None and _container(blocked, masks) is None:
                masks.append(blocked)
    return _outermost(masks)


def _first_closed_ancestor(path: str) -> str | None:
    for ancestor in reversed(PurePosixPath(path).parents[:-1]):
        if not os.stat(ancestor).st_mode & stat.S_IXOTH:
            return str(ancestor)
    return None


def _hide(masks: list[str], tmp_bytes: int) -> list[str]:
    argv: list[str] = []
    for mask in masks:
        if mask == _PRIVATE_TMP:
            argv += ["--perms", "1777", "--size", str(tmp_bytes), "--tmpfs", mask]
        else:
            argv += ["--perms", "0755", "--tmpfs", mask]
    return argv


def _expose(exposed: list[str], masks: list[str]) -> list[str]:
    """Bind hidden interpreter dirs back, creating traversable parents inside the mask."""
    argv: list[str] = []
    made: set[str] = set()
    for path in exposed:
        mask = _container(path, masks)
        if mask is None:
            continue
        for parent in reversed(PurePosixPath(path).parents):
            if _strictly_inside(str(parent), mask) and str(parent) not in made:
                made.add(str(parent))
                argv += ["--perms", "0755", "--dir", str(parent)]
        argv += ["--ro-bind", path, path]
    return argv


def _container(path: str, masks: list[str]) -> str | None:
    for mask in masks:
        if path == mask or _strictly_inside(path, mask):
            return mask
    return None


def _strictly_inside(path: str, parent: str) -> bool:
    return PurePosixPath(parent) in PurePosixPath(path).parents


def _outermost(paths) -> list[str]:
    """Sorted, without any path that lies inside another one of them."""
    kept: list[str] = []
    for path in sorted(set(paths)):
        if not any(path == other or _strictly_inside(path, other) for other in kept):
            kept.append(path)
    return kept
