"""The miner's feedback store: what validators told this miner about its own steps.

``POST /Feedback`` (:meth:`~miner.handlers.MinerEndpoints.feedback`) keeps each
accepted :class:`~protocol.feedback.StepFeedback` here before handing it to the
planner, and at start-up the app replays the store, in arrival order, into the planner's
``observe``: what a planner learned survives a restart.

The store keeps each validator's messages apart and bounds each on its own: the
:attr:`FeedbackStore.keep_per_validator` most recent messages of a validator, in the
order they arrived, within :attr:`FeedbackStore.max_validator_bytes` (one per validator
and block: a message sent again replaces the first). A validator's message only ever
evicts that validator's older ones, so no validator can wipe what another told this
miner. A message whose block is past this miner's view of the chain by more than
:data:`BLOCK_SLACK` is refused before it reaches the store (:func:`block_refusal`).
Rows are kept per miner hotkey, so a file shared by two hotkeys never replays one's
feedback into the other. The file is 0600 in a 0700 directory
(:func:`storage.make_private`).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planners.base import Planner, observe
from protocol.feedback import StepFeedback
from storage import open_shared

log = logging.getLogger("dagnet.miner")

KEEP_PER_VALIDATOR = 256
"""Messages kept per validator (the most recent to arrive)."""
MAX_VALIDATOR_BYTES = 2 * 1024 * 1024
"""Message bytes kept per validator (its share of the store); past it that validator's
oldest messages are dropped. The store holds at most this times the validators that may
send feedback (a validator permit: 64 on a subnet by default, so 128 MiB)."""
BLOCK_SLACK = 50
"""How far past the block of this miner's metagraph a message's block may be (10 minutes
of 12 s blocks: the miner re-reads the metagraph every 5 blocks by default)."""
MAX_WAITING = 64
"""Messages taken but not yet handed to the planner (a slow ``observe``); past it, 503 ``busy``."""

_SCHEMA = (
    (
        "CREATE TABLE IF NOT EXISTS feedback ("
        " miner_hotkey TEXT NOT NULL, validator TEXT NOT NULL, block INTEGER NOT NULL, body TEXT NOT NULL,"
        " PRIMARY KEY (miner_hotkey, validator, block))"
    ),
    "DROP INDEX IF EXISTS feedback_by_block",  # eviction was by block before it was by arrival
)
_INSERT = "INSERT OR REPLACE INTO feedback (miner_hotkey, validator, block, body) VALUES (?, ?, ?, ?)"
# A row's rowid is its arrival order: a new row's is above every row's in the table.
_TRIM_VALIDATOR = (
    "DELETE FROM feedback WHERE rowid IN (SELECT rowid FROM ("
    " SELECT rowid, SUM(LENGTH(CAST(body AS BLOB))) OVER newest AS kept, ROW_NUMBER() OVER newest AS n"
    " FROM feedback WHERE miner_hotkey = ? AND validator = ? WINDOW newest AS (ORDER BY rowid DESC))"
    " WHERE kept > ? OR n > ?)"
)
_REPLAY = "SELECT body FROM feedback WHERE miner_hotkey = ? ORDER BY rowid"


def block_refusal(block: int, chain_block: int) -> str | None:
    """Why a message about ``block`` is refused when this miner's chain is at
    ``chain_block``: it is more than :data:`BLOCK_SLACK` blocks ahead. ``None`` when taken."""
    if block <= chain_block + BLOCK_SLACK:
        return None
    return (
        f"feedback for block {block}, but this miner's chain is at block {chain_block}"
        f" (at most {BLOCK_SLACK} blocks ahead are taken)"
    )


class FeedbackStore:
    """Feedback for the miner ``hotkey`` in a SQLite file (WAL), safe across threads
    and worker processes. The file is created by the first :meth:`add`."""

    def __init__(
        self,
        path: Path,
        hotkey: str,
        *,
        keep_per_validator: int = KEEP_PER_VALIDATOR,
        max_validator_bytes: int = MAX_VALIDATOR_BYTES,
    ) -> None:
        self.path = Path(path)
        self.hotkey = hotkey
        self.keep_per_validator = keep_per_validator
        self.max_validator_bytes = max_validator_bytes
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def add(self, feedback: StepFeedback) -> None:
        """Keep ``feedback``, then drop its validator's oldest messages past that validator's bounds."""
        validator = feedback.validator_hotkey
        with self._lock:
            conn = self._connection()
            conn.execute(_INSERT, (self.hotkey, validator, feedback.block, feedback.model_dump_json()))
            conn.execute(_TRIM_VALIDATOR, (self.hotkey, validator, self.max_validator_bytes, self.keep_per_validator))

    def replay(self) -> Iterator[StepFeedback]:
        """Every kept message for this hotkey, in the order they arrived; none when there is no file yet.
        A row that no longer reads as a :class:`StepFeedback` is skipped."""
        if not self.path.exists():
            return
        with self._lock:
            rows = self._connection().execute(_REPLAY, (self.hotkey,)).fetchall()
        for (body,) in rows:
            try:
                yield StepFeedback.model_validate_json(body)
            except ValidationError:
                log.warning("a stored feedback message no longer reads as StepFeedback: skipped")

    def __len__(self) -> int:
        if not self.path.exists():
            return 0
        with self._lock:
            return (
                self._connection()
                .execute("SELECT COUNT(*) FROM feedback WHERE miner_hotkey = ?", (self.hotkey,))
                .fetchone()[0]
            )

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = open_shared(self.path, _SCHEMA, private=True)
        return self._conn


class FeedbackInbox:
    """Where accepted feedback goes: into the store, then to the planner's ``observe``.

    One daemon thread does both, one message at a time in arrival order, so a planner's
    ``observe`` is never called twice at once and a slow one never holds up the event
    loop (nor, being a daemon, the process's exit)."""

    def __init__(self, planner: Planner, store: FeedbackStore | None, *, max_waiting: int = MAX_WAITING) -> None:
        self.planner = planner
        self.store = store
        self.max_waiting = max_waiting
        self.waiting = 0
        self._jobs: queue.SimpleQueue[tuple[StepFeedback, asyncio.AbstractEventLoop, asyncio.Future[Any]]] = (
            queue.SimpleQueue()
        )
        self._worker: threading.Thread | None = None

    def replay(self) -> int:
        """Hand every stored message to the planner in the order they arrived; how many there were."""
        if self.store is None:
            return 0
        count = 0
        for feedback in self.store.replay():
            observe(self.planner, feedback)
            count += 1
        return count

    def submit(self, feedback: StepFeedback) -> asyncio.Future[tuple[bool, bool]] | None:
        """Queue ``feedback`` to be kept and handed to the planner; the future resolves to
        ``(stored, observed)``. ``None`` (nothing queued) while :attr:`max_waiting`
        messages are still in hand. Called on the event loop."""
        if self.waiting >= self.max_waiting:
            return None
        if self._worker is None:
            self._worker = threading.Thread(target=self._work, name="dagnet-feedback", daemon=True)
            self._worker.start()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[tuple[bool, bool]] = loop.create_future()
        self.waiting += 1
        self._jobs.put((feedback, loop, done))
        return done

    def _work(self) -> None:
        while True:
            feedback, loop, done = self._jobs.get()
            result = (self._stored(feedback), observe(self.planner, feedback))
            try:
                loop.call_soon_threadsafe(self._settle, done, result)
            except RuntimeError:  # the loop closed meanwhile
                pass

    def _settle(self, done: asyncio.Future[Any], result: tuple[bool, bool]) -> None:
        self.waiting -= 1
        if not done.done():  # the request may have gone (its caller hung up)
            done.set_result(result)

    def _stored(self, feedback: StepFeedback) -> bool:
        if self.store is None:
            return False
        try:
            self.store.add(feedback)
        except (sqlite3.Error, OSError) as exc:  # a full disk costs the history, not the planner its feedback
            log.warning("feedback from %s not stored: %s", feedback.validator_hotkey, exc)
            return False
        return True
