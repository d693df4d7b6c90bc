"""The secret room: the instance secret every hidden draw of this validator comes from.

The secret is :data:`SECRET_BYTES` random bytes, kept as hex in the ``secret`` table.
What the draws receive is not the secret itself but :func:`draw_key` of it: 256 bits of
scrypt (:data:`SCRYPT`), so every value a validator publishes or sends that was drawn
from its secret (a world's ``salt`` and truths, a drawn family's ``gen_`` id, an
instance) is a fast hash of a slow derivation: finding the secret from them costs one
scrypt per guess of 128 bits, finding the key 2^256 hashes.

A file of the store before it (schema 6) kept a 63-bit integer in ``meta``, used as
it was by the draws. Migration 7 keeps it as the *legacy* secret and puts a new one
beside it, waiting: the first step that knows the chain's tempo schedules it for the
start of the next tempo (:func:`schedule`), so the tempo in play keeps its families,
tiers and world, and every record keeps the secret of its block (:meth:`Secrets.at`).
"""

from __future__ import annotations

import functools
import hashlib
import secrets
import sqlite3
import string
from dataclasses import dataclass

SECRET_BYTES = 16
"""Random bytes in a new secret: 128 bits."""
WEAK_BELOW = 2**96
"""A secret (as a number) under this is refused as weak: a random 128-bit one is, once in 2^32."""
LEGACY_WEAK_BELOW = 2**32
"""A legacy 63-bit secret under this is refused as weak: a random one is, once in 2^31."""
SCRYPT = {"n": 2**14, "r": 8, "p": 1}
"""scrypt's cost for :func:`draw_key` (16 MiB, tens of milliseconds once per secret)."""

TABLE = """CREATE TABLE IF NOT EXISTS secret (
    slot INTEGER PRIMARY KEY CHECK (slot = 0), hex TEXT NOT NULL, since_block INTEGER)"""


@dataclass(frozen=True, slots=True)
class Secrets:
    """A state file's secrets: ``secret`` (hex) from ``since_block`` on (``None``: not
    scheduled yet), ``legacy`` (a 63-bit secret of an older file) before it."""

    secret: str
    since_block: int | None
    legacy: int | None

    def at(self, block: int | None) -> int:
        """What the draws of the step at ``block`` receive (``None``: the newest in effect)."""
        if self.legacy is not None and (self.since_block is None or (block is not None and block < self.since_block)):
            return self.legacy
        return draw_key(self.secret)


@functools.lru_cache(maxsize=8)
def draw_key(secret: str) -> int:
    """The number every draw of ``secret`` (hex) starts from: 256 bits of scrypt."""
    key = hashlib.scrypt(bytes.fromhex(secret), salt=b"dagnet instance draws", dklen=32, **SCRYPT)
    return int.from_bytes(key, "big")


def migration(conn: sqlite3.Connection) -> None:
    """Schema 7: a 128-bit secret, waiting to be scheduled beside a legacy 63-bit one."""
    conn.execute(TABLE)
    legacy = conn.execute("SELECT 1 FROM meta WHERE key = 'instance_secret'").fetchone()
    if legacy is not None:
        conn.execute("INSERT OR IGNORE INTO secret (slot, hex, since_block) VALUES (0, ?, NULL)", (_new(),))


def make(conn: sqlite3.Connection) -> None:
    """A new secret in effect from block 0; a legacy one is dropped."""
    conn.execute("DELETE FROM meta WHERE key = 'instance_secret'")
    conn.execute("INSERT OR REPLACE INTO secret (slot, hex, since_block) VALUES (0, ?, 0)", (_new(),))


def read(conn: sqlite3.Connection) -> Secrets | str:
    """The file's secrets, or why they cannot be used (lost, or weak)."""
    row = conn.execute("SELECT hex, since_block FROM secret").fetchone()
    legacy = conn.execute("SELECT value FROM meta WHERE key = 'instance_secret'").fetchone()
    if row is None:
        return "has lost its instance secret"
    weak = _weak(row[0]) or (None if legacy is None else _weak_legacy(legacy[0]))
    if weak is not None:
        return f"has a weak instance secret ({weak})"
    return Secrets(row[0], row[1], None if legacy is None else legacy[0])


def schedule(conn: sqlite3.Connection, block: int, tempo: int | None) -> int | None:
    """Put a waiting secret in effect from the start of the tempo after ``block``'s
    (``tempo`` blocks long; from ``block`` without a tempo); returns that block, ``None``
    when no secret was waiting."""
    since = block if not tempo else (block // tempo + 1) * tempo
    changed = conn.execute("UPDATE secret SET since_block = ? WHERE since_block IS NULL", (since,)).rowcount
    return since if changed else None


def _new() -> str:
    while True:
        secret = secrets.token_hex(SECRET_BYTES)
        if _weak(secret) is None:
            return secret


def _weak(secret: object) -> str | None:
    if (
        not isinstance(secret, str)
        or len(secret) < 2 * SECRET_BYTES
        or len(secret) % 2
        or not set(secret) <= set(string.hexdigits)
    ):
        return f"{secret!r} is not {2 * SECRET_BYTES} or more hex digits, in pairs"
    if int(secret, 16) < WEAK_BELOW:
        return f"{secret!r} is under 2^96"
    return None


def _weak_legacy(secret: object) -> str | None:
    if not isinstance(secret, int):
        return f"{secret!r} is not a number"
    if secret < LEGACY_WEAK_BELOW:
        return f"{secret} is under 2^32"
    return None
