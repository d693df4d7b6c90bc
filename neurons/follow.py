"""A miner's view of the chain, kept fresh in the background.

:class:`MetagraphFollower` reads the metagraph every few blocks into the
:class:`miner.metagraph.StaticMetagraph` the miner's blacklist reads, and makes
sure the chain advertises this miner's axon (at start, and again whenever the
chain's record differs from the address the miner serves on). When the chain is
unreachable it keeps the last snapshot — the miner goes on serving on it — and
tries again with a backoff that doubles up to :data:`MAX_BACKOFF_S`, warning once a
minute with the endpoint and the cause (:class:`chain.network.OutageWarner`). A
metagraph the chain refuses (no such subnet) or one of another netuid is never
taken: the miner stays not ready, says why on ``/health``, and logs it once. Every
:data:`VERSION_EVERY_BLOCKS` it reads the subnet's ``weights_version`` too and warns when the
chain expects a newer dagnet (:func:`protocol.version.upgrade_needed`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

from chain.base import Chain, ChainError
from chain.network import OutageWarner
from miner.metagraph import StaticMetagraph, netuid_mismatch
from protocol.metagraph import Axon
from protocol.version import upgrade_needed

log = logging.getLogger("dagnet.miner.chain")
MAX_BACKOFF_S = 30.0
VERSION_EVERY_BLOCKS = 100
"""Blocks between two reads of the chain's ``weights_version`` (subnet owners change it rarely)."""


def next_pause(pause: float, poll_s: float, *, answered: bool) -> float:
    """The wait before the next look: ``poll_s`` while the chain answers, doubling up to
    :data:`MAX_BACKOFF_S` while it does not."""
    return poll_s if answered else min(pause * 2, max(MAX_BACKOFF_S, poll_s))


class MetagraphFollower:
    def __init__(
        self,
        open_chain: Callable[[], Chain],
        target: StaticMetagraph,
        *,
        axon: Axon | None,
        every_blocks: int = 5,
        poll_s: float = 1.0,
    ) -> None:
        self._open_chain = open_chain
        self.target = target
        self.axon = axon
        self.every_blocks = every_blocks
        self.poll_s = poll_s
        self._synced_block: int | None = None
        self._said_unregistered = False
        self._refused: str | None = None
        self._outage = OutageWarner(log)
        self._version_block: int | None = None
        self._upgrade: str | None = None

    def start(self) -> threading.Thread:
        """Follow on a daemon thread with its own event loop (the app's loop is uvicorn's)."""
        thread = threading.Thread(target=asyncio.run, args=(self.run(),), name="metagraph-follower", daemon=True)
        thread.start()
        return thread

    async def run(self, stop: asyncio.Event | None = None) -> None:
        chain = self._open_chain()
        pause = self.poll_s
        try:
            while stop is None or not stop.is_set():
                pause = next_pause(pause, self.poll_s, answered=await self.step(chain))
                await asyncio.sleep(pause)
        finally:
            await chain.close()

    async def step(self, chain: Chain) -> bool:
        """One look at the head; a sync when ``every_blocks`` have passed (or none yet).
        False when the chain did not answer (a transient failure: back off)."""
        try:
            head = await chain.block()
            if self._synced_block is None or head >= self._synced_block + self.every_blocks:
                await self._sync(chain)
        except ChainError as exc:
            kept = self.target.snapshot()
            serving = f"serving on the metagraph of block {kept.block}" if kept is not None else "not synced"
            if exc.transient:
                self._outage.failed(exc, serving)
            elif str(exc) != self._refused:  # the chain's answer will not change by asking every poll
                log.error("cannot follow the chain: %s; %s", exc, serving)
            self._refused = None if exc.transient else str(exc)
            self.target.fail(str(exc))
            return not exc.transient
        self._outage.recovered()
        return True

    async def _sync(self, chain: Chain) -> None:
        snapshot = await chain.metagraph()
        mismatch = netuid_mismatch(snapshot, chain.netuid)
        if mismatch is not None:
            raise ChainError(mismatch)
        self.target.update(snapshot)
        self._refused = None
        self._synced_block = snapshot.block
        if self._version_block is None or snapshot.block >= self._version_block + VERSION_EVERY_BLOCKS:
            await self._check_version(chain, snapshot.block)
        me = snapshot.by_hotkey(chain.hotkey)
        if me is None:
            if not self._said_unregistered:
                log.warning(
                    "hotkey %s is not registered on netuid %d: validators cannot reach this miner "
                    "(register with `dagnet subnet register`)",
                    chain.hotkey,
                    snapshot.netuid,
                )
                self._said_unregistered = True
            return
        if self._said_unregistered:
            log.info("hotkey %s is registered as uid %d", chain.hotkey, me.uid)
            self._said_unregistered = False
        if self.axon is not None and me.axon != self.axon:
            await chain.serve_axon(self.axon.host, self.axon.port)
            log.info("axon served: %s on uid %d", self.axon.url, me.uid)

    async def _check_version(self, chain: Chain, block: int) -> None:
        """Warn once per change when the chain expects a newer ``version_key`` than this code's.
        A read that fails is tried again at the next sync; it never makes the miner not ready."""
        try:
            upgrade = upgrade_needed((await chain.hyperparameters()).weights_version)
        except ChainError as exc:
            log.debug("cannot read the chain's weights_version: %s", exc)
            return
        self._version_block = block
        if upgrade is not None and upgrade != self._upgrade:
            log.warning("%s", upgrade)
        self._upgrade = upgrade
