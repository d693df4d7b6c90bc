"""The planning processes shared across validators: in turn, with one kept for a light caller.

The miner plans in ``slots`` processes (:mod:`miner.workers`). :class:`FairShare`
decides which validator's query a free one takes:

- one validator hotkey plans at most ``per_validator`` queries at once, and at most
  ``queue_per_validator`` more of its queries wait; one beyond is refused at once
  (:class:`Busy`, which the miner answers 429 ``planner_busy``);
- validators that wait are served in turn (round-robin over hotkeys), not in the order
  their queries came: a validator that queued many waits behind each other one once;
- with two processes or more, the last free one goes only to a *light* validator: one
  with no other query running or waiting that has held less than :data:`LIGHT_USE` of a
  process over about the last :data:`USAGE_TAU_S`. Validators that flood the miner, with
  queries queued behind their own or one after another, share the other processes, so
  one or two of them never hold all of them, and a validator that asks now and then (as
  a validator does, once a step) finds one free.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["LIGHT_USE", "USAGE_TAU_S", "Busy", "FairShare"]

USAGE_TAU_S = 10.0
"""How long a validator's use of the planning processes is remembered: the process-seconds
it held fade by a factor e every 10 s (held all along, one process weighs 10 s)."""
LIGHT_USE = 0.5
"""The share of one process a validator may have held, on average over about the last
:data:`USAGE_TAU_S`, and still count as light (5 s of the 10 s that holding one all along weighs)."""


class Busy(Exception):
    """A query refused because its validator already has its queries running and waiting."""


@dataclass
class _Share:
    """One validator's queries: planning now, and waiting in arrival order."""

    running: int = 0
    waiting: deque[asyncio.Future[None]] = field(default_factory=deque)
    used_s: float = 0.0
    """Process-seconds held, fading with :data:`USAGE_TAU_S`, as of ``at``."""
    at: float = 0.0

    def pending(self) -> int:
        return self.running + sum(1 for fut in self.waiting if not fut.done())

    def used(self, now: float) -> float:
        """The fading process-seconds held up to ``now`` (``running`` held since ``at``)."""
        fade = math.exp(-max(0.0, now - self.at) / USAGE_TAU_S)
        self.used_s = self.used_s * fade + self.running * USAGE_TAU_S * (1.0 - fade)
        self.at = now
        return self.used_s


class FairShare:
    """``slots`` planning processes shared across validator hotkeys (see the module)."""

    def __init__(
        self, slots: int, *, per_validator: int, queue_per_validator: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if slots < 1 or per_validator < 1 or queue_per_validator < 0:
            raise ValueError("slots and per_validator must be at least 1, queue_per_validator at least 0")
        self.slots = slots
        self.per_validator = per_validator
        self.queue_per_validator = queue_per_validator
        self._clock = clock
        self._free = slots
        self._shares: dict[str, _Share] = {}  # bounded by the callers the blacklist lets in
        self._turns: deque[str] = deque()  # hotkeys with queries waiting, the next to serve first

    @property
    def free(self) -> int:
        return self._free

    def waiting(self, hotkey: str) -> int:
        share = self._shares.get(hotkey)
        return 0 if share is None else share.pending() - share.running

    async def acquire(self, hotkey: str) -> None:
        """Wait for a process for ``hotkey``'s query; raises :class:`Busy` when it may not wait."""
        share = self._shares.get(hotkey)
        if share is None:
            share = self._shares[hotkey] = _Share(at=self._clock())
        if not share.waiting and self._may_start(share, share.running + 1):
            self._start(share)
            return
        queued = share.pending() - share.running
        if queued >= self.queue_per_validator:
            raise Busy(
                f"this validator already has {share.running} planning quer{'y' if share.running == 1 else 'ies'}"
                f" running and {queued} waiting"
            )
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        share.waiting.append(fut)
        if hotkey not in self._turns:
            self._turns.append(hotkey)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release(hotkey)  # the process was handed over just as the caller left
            else:
                self._drop(hotkey, fut)
            raise

    def release(self, hotkey: str) -> None:
        """``hotkey``'s query is done with its process: hand it to the next in turn."""
        share = self._shares[hotkey]
        share.used(self._clock())
        share.running -= 1
        self._free += 1
        self._dispatch()

    def _may_start(self, share: _Share, pending: int) -> bool:
        """Whether a query of ``share`` may take a free process now, ``pending`` being its
        validator's queries running or waiting, this one included."""
        if self._free == 0 or share.running >= self.per_validator:
            return False
        return self._free > 1 or self.slots == 1 or self._light(share, pending)

    def _light(self, share: _Share, pending: int) -> bool:
        return pending == 1 and share.used(self._clock()) < LIGHT_USE * USAGE_TAU_S

    def _start(self, share: _Share) -> None:
        share.used(self._clock())
        share.running += 1
        self._free -= 1

    def _dispatch(self) -> None:
        """Hand free processes to waiting queries, one validator at a time in turn."""
        while self._free > 0:
            for _ in range(len(self._turns)):
                hotkey = self._turns.popleft()
                share = self._shares[hotkey]
                while share.waiting and share.waiting[0].done():  # its caller left
                    share.waiting.popleft()
                if not share.waiting:
                    continue
                if self._may_start(share, share.pending()):
                    self._start(share)
                    share.waiting.popleft().set_result(None)
                    if share.waiting:
                        self._turns.append(hotkey)  # its next query waits for its next turn
                    break
                self._turns.append(hotkey)
            else:
                return  # nobody waiting may start

    def _drop(self, hotkey: str, fut: asyncio.Future[None]) -> None:
        share = self._shares[hotkey]
        if fut in share.waiting:
            share.waiting.remove(fut)
        self._dispatch()  # a validator with one query fewer may be light now
