"""The two locks beside an embedded chain's state file, held by its node for as long as it runs.

- ``PATH.lock`` makes the node the only one on the file: a second node fails
  to take it and is refused.
- ``PATH.running`` tells clients the node is alive: a client that can take it
  (for an instant) knows no node holds it, so the chain is down, even after a
  ``kill -9`` (the kernel drops a dead process's locks). The node takes this
  one waiting rather than failing, because the only other holders are such
  probes, for microseconds; the exclusive lock already settled who the node is.

A node that stops cleanly removes both files (:func:`release_node_locks`); one killed
leaves them, unlocked, and the next node takes them.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class NodeError(Exception):
    """The node cannot start (the file is in use, the address cannot be bound)."""


def hold_node_locks(path: Path) -> tuple[int, int]:
    """Take both locks for this process's lifetime (released on exit); NodeError if a node runs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    exclusive = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(exclusive, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(exclusive)
        raise NodeError(f"an embedded chain is already running on {path}") from None
    running = os.open(f"{path}.running", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(running, fcntl.LOCK_EX)
    return exclusive, running


def release_node_locks(path: Path, locks: tuple[int, int]) -> None:
    """Remove both files, then release the locks: unlinked while still held, so a node or
    a probe that opens the path afterwards finds a new file (or none), never one whose
    lock is about to be let go."""
    for suffix in (".running", ".lock"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    for fd in locks:
        os.close(fd)


def node_running(path: Path) -> bool:
    """Whether a node holds ``path``'s running lock right now."""
    try:
        fd = os.open(f"{path}.running", os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
