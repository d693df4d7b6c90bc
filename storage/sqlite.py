"""Opening one SQLite file from several processes that may start at the same moment.

Two connections switching a fresh file to WAL together can both get
``database is locked``: the mode switch needs an exclusive lock, and SQLite does
not always call the busy handler for it (it would deadlock two readers that both
want to upgrade). So the switch is retried until ``busy_timeout_s`` runs out,
and stops as soon as any process has made the file WAL (the mode is stored in
the file). Everything after the switch (schema statements included) waits on
the ordinary busy timeout.
"""

from __future__ import annotations

import logging
import os
import random
import sqlite3
import stat
import time
from pathlib import Path

log = logging.getLogger("dagnet.storage")

_SIDE_FILES = ("-wal", "-shm", "-journal")
"""What SQLite keeps beside a database file."""


def open_shared(
    path: Path,
    schema: tuple[str, ...] = (),
    *,
    busy_timeout_s: float = 10.0,
    private: bool = False,
) -> sqlite3.Connection:
    """A connection in autocommit mode to a WAL file, with ``schema`` applied.

    Safe when many processes open the same fresh file at once. Raises
    ``sqlite3.OperationalError`` only if the file stays locked for longer than
    ``busy_timeout_s``. ``private``: the file (and SQLite's files beside it) is
    readable by its owner only, in a directory only its owner can enter (see
    :func:`make_private`).
    """
    path = Path(path)
    if private:
        make_private(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_s)
    try:
        _switch_to_wal(conn, time.monotonic() + busy_timeout_s)
        conn.execute("PRAGMA synchronous=NORMAL")
        for statement in schema:
            conn.execute(statement)
    except BaseException:
        conn.close()
        raise
    return conn


def _switch_to_wal(conn: sqlite3.Connection, deadline: float) -> None:
    delay = 0.001
    while True:
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            mode = None
        if mode is not None and mode.lower() == "wal":
            return
        if time.monotonic() >= deadline:
            raise sqlite3.OperationalError(f"could not switch to WAL mode (journal_mode={mode})")
        # Jitter keeps two processes from retrying in lockstep.
        time.sleep(delay * (1 + random.random()))
        delay = min(delay * 2, 0.05)


def make_private(path: Path) -> None:
    """Create ``path`` 0600 in a 0700 directory, or tighten them to those modes.

    A directory made here is 0700. An existing one is tightened only when it holds
    nothing but this database's files (a folder it shares, such as ``/tmp`` or a run
    folder, is not ours to close): else a warning names it. The file, and its
    ``-wal``/``-shm`` (which SQLite creates with the file's mode), become 0600. A mode
    that cannot be changed (a file of another user, a file system without modes) is
    logged and left: the database still opens.
    """
    directory = path.parent
    if not directory.exists():
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    owned = {path.name, *(path.name + side for side in _SIDE_FILES)}
    if stat.S_IMODE(directory.stat().st_mode) & 0o077:
        if set(os.listdir(directory)) <= owned:
            _set_mode(directory, 0o700)
        else:
            log.warning("%s holds other files and is open to others: %s itself is kept 0600", directory, path.name)
    os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
    for name in sorted(owned):
        if (directory / name).exists():
            _set_mode(directory / name, 0o600)


def _set_mode(path: Path, mode: int) -> None:
    try:
        path.chmod(mode)
    except OSError as exc:
        log.warning("cannot make %s %o: %s", path, mode, exc.strerror or exc)
