"""Replay protection shared by every worker process of one miner.

``bittensor.http_auth.verify`` asks a nonce store whether a ``(hotkey, nonce)``
pair is new. One uvicorn worker keeps that in memory; several workers share a
SQLite file, where ``INSERT OR IGNORE`` on the pair's primary key is the atomic
"check and store": exactly one process sees its insert land.

Nonces are nanosecond timestamps, and ``verify`` rejects any nonce older than
its freshness window before consulting the store, so rows whose nonce is older
than ``retention`` can never matter again; they are purged in small batches.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

from bittensor.http_auth import InMemoryNonceStore, NonceStore

from storage import open_shared

from .settings import MinerSettings

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS nonces ("
    " nonce INTEGER NOT NULL, hotkey TEXT NOT NULL,"
    " PRIMARY KEY (nonce, hotkey)) WITHOUT ROWID"
)
# The key leads with the nonce so the purge is a range scan on the key itself.
_INSERT = "INSERT OR IGNORE INTO nonces (nonce, hotkey) VALUES (?, ?)"
_PURGE = "DELETE FROM nonces WHERE (nonce, hotkey) IN (SELECT nonce, hotkey FROM nonces WHERE nonce < ? LIMIT ?)"


class SqliteNonceStore:
    """A :class:`~bittensor.http_auth.NonceStore` in a SQLite file (WAL mode).

    Safe across processes and threads. Each process opens its own connection
    lazily, so a store created before ``fork`` still works in the children.
    """

    def __init__(
        self,
        path: Path,
        *,
        retention: float = 60.0,
        purge_every: int = 1024,
        purge_batch: int = 4096,
    ) -> None:
        self.path = Path(path)
        self.retention = retention
        self._purge_every = purge_every
        self._purge_batch = purge_batch
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self._since_purge = 0

    def check_and_store(self, hotkey_ss58: str, nonce_ns: int) -> bool:
        with self._lock:
            conn = self._connection()
            inserted = conn.execute(_INSERT, (nonce_ns, hotkey_ss58)).rowcount == 1
            self._since_purge += 1
            if self._since_purge >= self._purge_every:
                self._since_purge = 0
                self._purge(conn)
            return inserted

    def purge(self) -> int:
        """Delete expired rows now; returns how many went."""
        with self._lock:
            return self._purge(self._connection())

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def _purge(self, conn: sqlite3.Connection) -> int:
        cutoff = time.time_ns() - int(self.retention * 1e9)
        removed = 0
        while True:
            batch = conn.execute(_PURGE, (cutoff, self._purge_batch)).rowcount
            removed += batch
            if batch < self._purge_batch:
                return removed

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():
            self._conn = open_shared(self.path, (_SCHEMA,))
            self._pid = os.getpid()
        return self._conn


def nonce_store_for(settings: MinerSettings) -> NonceStore:
    """In memory for one worker; the shared SQLite file when there are several."""
    retention = max(60.0, settings.auth.retention_s)
    if settings.workers == 1:
        return InMemoryNonceStore(retention=retention)
    return SqliteNonceStore(settings.nonce_db_path(), retention=retention)
