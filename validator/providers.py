"""Where a validator finds the tool providers of each partner subnet.

A task names its partner subnets ``sn<netuid>`` (``sn8`` is netuid 8). The
providers of ``snN`` are the neurons serving an axon on netuid N's metagraph,
ordered by stake (largest first, then uid), so the routing policy's ``top_k``
asks the best-staked providers. :class:`MetagraphProviders` re-reads those
metagraphs at most once per step; a subnet whose metagraph cannot be read keeps
its last known providers.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Protocol

from protocol.metagraph import MetagraphSnapshot, Peer

from .remote import ProviderSelector, every_peer_serves

log = logging.getLogger(__name__)

_SUBNET = re.compile(r"sn(\d{1,5})")

MetagraphReader = Callable[[int], Awaitable[MetagraphSnapshot]]
"""``netuid -> metagraph`` of that subnet at the chain head."""


def subnet_netuid(subnet: str) -> int | None:
    """``"sn8" -> 8``; ``None`` for a name that is not ``sn<netuid>``."""
    match = _SUBNET.fullmatch(subnet)
    return int(match.group(1)) if match else None


class ProviderDirectory(Protocol):
    async def refresh(self, subnets: Iterable[str]) -> None:
        """Bring the providers of ``subnets`` up to date before a step."""
        ...

    def selector(self, offset: int) -> ProviderSelector:
        """``subnet -> providers``; ``offset`` rotates equally good providers to spread load."""
        ...


class MetagraphProviders:
    """Providers read from each partner subnet's metagraph."""

    def __init__(self, read: MetagraphReader) -> None:
        self._read = read
        self._providers: dict[str, tuple[Peer, ...]] = {}

    async def refresh(self, subnets: Iterable[str]) -> None:
        for subnet in sorted(set(subnets)):
            netuid = subnet_netuid(subnet)
            if netuid is None:
                continue
            try:
                snapshot = await self._read(netuid)
            except Exception as exc:  # an unreadable partner subnet must not stop the step
                log.warning("cannot read providers of %s (netuid %s): %s", subnet, netuid, exc)
                continue
            self._providers[subnet] = providers_of(snapshot)

    def selector(self, offset: int) -> ProviderSelector:
        known = dict(self._providers)
        return lambda subnet: known.get(subnet, ())

    def known(self) -> dict[str, tuple[Peer, ...]]:
        return dict(self._providers)


class FixedProviders:
    """Every subnet served by the same peers (tests, benchmarks, single-host runs)."""

    def __init__(self, peers: Sequence[Peer]) -> None:
        self._peers = tuple(peers)

    async def refresh(self, subnets: Iterable[str]) -> None:
        return None

    def selector(self, offset: int) -> ProviderSelector:
        return every_peer_serves(self._peers, offset=offset)


def providers_of(snapshot: MetagraphSnapshot) -> tuple[Peer, ...]:
    serving = [n for n in snapshot.neurons if n.axon is not None]
    serving.sort(key=lambda n: (-n.stake, n.uid))
    return tuple(Peer.from_neuron(n) for n in serving)
