"""The bubblewrap command line: what a sandboxed program sees of the host.

The run starts from an empty root and gets only what the interpreter needs, read-only:
the system directories (``/usr`` and its merged-usr links ``/bin``, ``/lib``...), the
dynamic linker's cache, and the interpreter's own prefix with every site-packages
directory in it hidden behind an empty tmpfs. The caller's checkout, virtualenv, home,
state and secrets are simply not there. ``/tmp`` is the only writable place: a
private, size-limited tmpfs holding the work dir. Nothing the program writes reaches
the host.
"""

from __future__ import annotations

import glob
import os
from pathlib import PurePosixPath

from .interpreter import base_prefix, interpreter
from .steady import steady_argv

NOBODY = 65534
STAGE_IN = "/tmp/.dagnet-in"
"""Where the host work dir is bound read-only; the launcher copies it to WORKDIR."""
WORKDIR = "/tmp/work"

_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_SYSTEM_FILES = ("/etc/ld.so.cache",)
_PACKAGE_DIRS = ("lib/python3*/site-packages", "lib/python3*/dist-packages", "lib/python3/dist-packages")


def bwrap_argv(host_dir: str, *, as_root: bool, tmp_bytes: int) -> list[str]:
    """The ``bwrap ... --`` prefix that runs a command in a fresh sandbox.

    As root no user namespace is made (uid 0 inside one is still root on the host
    for RLIMIT_NPROC), so the launcher keeps CAP_SETUID/CAP_SETGID just long
    enough to drop to the run's own uid. Otherwise an unprivileged user namespace maps the
    caller to ``nobody`` and RLIMIT_NPROC counts only the sandbox's own processes.
    """
    argv = ["bwrap", *_system(), *_interpreter()]
    argv += ["--dev", "/dev", "--proc", "/proc"]
    argv += ["--perms", "1777", "--size", str(tmp_bytes), "--tmpfs", "/tmp"]
    argv += ["--ro-bind", host_dir, STAGE_IN]
    hidden = _package_dirs()
    argv += _hide(hidden)
    argv += steady_argv(hidden)
    argv += _read_only(hidden)
    argv += ["--remount-ro", "/dev", "--remount-ro", "/"]
    argv += _namespaces(as_root)
    # No --new-session: the caller starts bwrap in a session of its own (so there is no
    # terminal to reach), and bwrap's setsid would take the namespace's init out of the
    # process group the caller kills, alive until bwrap binds it to its parent's life.
    argv += ["--die-with-parent", "--chdir", "/", "--"]
    return argv


def visible_roots() -> list[str]:
    """The host directories a run can read (site-packages inside them excepted)."""
    return _outermost([*(p for p in _SYSTEM if os.path.isdir(p) and not os.path.islink(p)), *_interpreter_dirs()])


def _system() -> list[str]:
    argv: list[str] = []
    for path in _SYSTEM:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    for path in _SYSTEM_FILES:
        argv += ["--perms", "0755", "--dir", os.path.dirname(path), "--ro-bind-try", path, path]
    return argv


def _interpreter() -> list[str]:
    """Bind the interpreter's dirs that the system dirs do not hold; parents made on
    the way are traversable, so an unprivileged uid reaches a prefix under ``/root``."""
    argv: list[str] = []
    made: set[PurePosixPath] = set()
    system = [p for p in _SYSTEM if os.path.isdir(p) and not os.path.islink(p)]
    for path in _interpreter_dirs():
        if any(path == root or _strictly_inside(path, root) for root in system):
            continue
        for parent in reversed(PurePosixPath(path).parents[:-1]):
            if parent not in made:
                made.add(parent)
                argv += ["--perms", "0755", "--dir", str(parent)]
        argv += ["--ro-bind", path, path]
    return argv


def _interpreter_dirs() -> list[str]:
    """The base interpreter's prefix and the directory holding its executable."""
    roots = {base_prefix(), os.path.dirname(interpreter())}
    return _outermost(root for root in roots if os.path.isdir(root))


def _package_dirs() -> list[str]:
    """Every site-packages directory the run could see: an installed validator (task
    generators included) lives there."""
    found: set[str] = set()
    for root in visible_roots():
        for prefix in {root, os.path.join(root, "local")}:
            for pattern in _PACKAGE_DIRS:
                found.update(os.path.realpath(p) for p in glob.glob(os.path.join(prefix, pattern)))
    return sorted(path for path in found if os.path.isdir(path))


def _hide(package_dirs: list[str]) -> list[str]:
    """An empty tmpfs over each package directory."""
    argv: list[str] = []
    for path in package_dirs:
        argv += ["--perms", "0555", "--tmpfs", path]
    return argv


def _read_only(package_dirs: list[str]) -> list[str]:
    argv: list[str] = []
    for path in package_dirs:
        argv += ["--remount-ro", path]
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


def _strictly_inside(path: str, parent: str) -> bool:
    return PurePosixPath(parent) in PurePosixPath(path).parents


def _outermost(paths) -> list[str]:
    """Sorted, without any path that lies inside another one of them."""
    kept: list[str] = []
    for path in sorted(set(paths)):
        if not any(path == other or _strictly_inside(path, other) for other in kept):
            kept.append(path)
    return kept
