"""Choosing a chain the Bittensor way: ``finney``, ``test``, ``local``, a ``ws://`` URL, or ``embedded[:PATH]``;
and what a process says when that chain cannot be reached (:class:`ChainUnreachable`, :class:`OutageWarner`)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from storage import dagnet_home

from .base import ChainError

DEFAULT_EMBEDDED_STATE = dagnet_home() / "chain.sqlite"


@dataclass(frozen=True, slots=True)
class Network:
    """Where a neuron's chain is: a network name or URL for ``bt.Client``, or an embedded state file."""

    name: str
    embedded_state: Path | None = None

    @property
    def is_embedded(self) -> bool:
        return self.embedded_state is not None

    @property
    def is_live(self) -> bool:
        """Whether TAO here is real: ``finney`` (and its ``archive`` nodes), ``test``, or a
        ``wss://`` URL (a public node); ``local``, ``devnet``, ``ws://`` and embedded are
        development networks."""
        return self.name in LIVE_NETWORKS or self.name.startswith("wss://")


LIVE_NETWORKS = ("finney", "archive", "test")
NETWORK_FORMS = "finney | test | local | ws://URL | embedded[:PATH]"
NO_NETWORK = f"no network given: name one with --network ({NETWORK_FORMS}) or BT_NETWORK"


def parse_network(value: str | None, endpoint: str | None = None, *, default: str | None = "finney") -> Network:
    """``endpoint`` (``--subtensor.chain_endpoint``) wins over ``value``; then ``BT_NETWORK``;
    then ``default`` (a neuron passes ``None``: it never picks a chain on its own).

    Raises ``ValueError`` for a name that is none of the accepted forms, or
    (:data:`NO_NETWORK`) for none at all without a default.
    """
    chosen = endpoint or value or os.environ.get("BT_NETWORK") or default
    if chosen is None:
        raise ValueError(NO_NETWORK)
    if chosen == "embedded" or chosen.startswith("embedded:"):
        _, _, path = chosen.partition(":")
        return Network("embedded", Path(path).expanduser() if path else DEFAULT_EMBEDDED_STATE)
    if chosen in ("finney", "test", "local", "archive", "devnet") or chosen.startswith(("ws://", "wss://")):
        return Network(chosen)
    raise ValueError(f"unknown network {chosen!r}: use finney, test, local, a ws:// or wss:// URL, or embedded[:PATH]")


class ChainUnreachable(ChainError):
    """The chain's endpoint did not answer: refused, timed out, or the connection dropped.

    Always transient. ``endpoint`` is the URL tried (with the network's name when it
    has one, e.g. ``local (ws://127.0.0.1:9944)``); ``cause`` is the transport's reason.
    """

    def __init__(self, endpoint: str, cause: str, *, what: str | None = None) -> None:
        prefix = f"{what}: " if what else ""
        super().__init__(f"{prefix}cannot reach the chain at {endpoint}: {cause}", transient=True)
        self.endpoint = endpoint
        self.cause = cause


class OutageWarner:
    """One warning per ``every_s`` while a chain stays unreachable, then one line when it answers again.

    For long-running processes (a miner following the metagraph, a validator's loop)
    that retry for as long as the chain is down: the log says that it is down, where,
    and since when, without a line per attempt.
    """

    def __init__(
        self, log: logging.Logger, *, every_s: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._log = log
        self._every = every_s
        self._clock = clock
        self._since: float | None = None
        self._last: float | None = None
        self._quiet = 0

    @property
    def down(self) -> bool:
        return self._since is not None

    def failed(self, exc: ChainError, doing: str = "") -> None:
        """Record one failed attempt; warn if this is the first or ``every_s`` passed since the last warning."""
        now = self._clock()
        if self._since is None:
            self._since = now
        if self._last is not None and now - self._last < self._every:
            self._quiet += 1
            return
        down_for = now - self._since
        held = f" (down {down_for:.0f} s, {self._quiet} more failures not logged)" if self._last is not None else ""
        self._log.warning("%s%s; retrying with backoff%s", exc, f"; {doing}" if doing else "", held)
        self._last, self._quiet = now, 0

    def recovered(self) -> None:
        """The chain answered: say so once if it had been down."""
        if self._since is not None:
            self._log.info("chain reachable again after %.0f s", self._clock() - self._since)
        self._since = self._last = None
        self._quiet = 0
