"""Where a validator finds the external tool providers the operator opted into.

A :class:`ProviderDirectory` says which subnets it serves and, for a subnet, its
providers in preference order, each a :class:`Provider` (the peer, and the coldkey
that owns it when known). Three kinds:

- :class:`FixedProviders`: a list the operator wrote (``--providers FILE``, a
  ``{"kind": "dagnet", "providers": [...]}`` adapter); the list is rotated per plan
  to spread the load;
- :class:`MetagraphProviders`: the neurons serving an axon on one netuid's metagraph
  (``{"kind": "dagnet", "netuid": N}``), largest stake first, then uid, so the
  routing policy's ``top_k`` asks the best-staked ones; re-read before each step,
  and a metagraph that cannot be read keeps its last known providers;
- :class:`ProviderTable`: the adapters table, a directory per subnet name or ``"*"``.

Nothing here decides whom to trust: :mod:`validator.adapters` filters these lists
for each miner's plan.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from protocol.metagraph import MetagraphSnapshot, Peer

log = logging.getLogger(__name__)

EVERY_SUBNET = "*"
"""The table key that stands for every subnet without an entry of its own."""

MetagraphReader = Callable[[int], Awaitable[MetagraphSnapshot]]
"""``netuid -> metagraph`` of that subnet at the chain head."""


@dataclass(frozen=True, slots=True)
class Provider:
    """A tool provider: the peer the validator calls, and its coldkey (``""``: unknown)."""

    peer: Peer
    coldkey: str = ""


class ProviderDirectory(Protocol):
    def serves(self, subnet: str) -> bool:
        """Whether nodes of ``subnet`` go to this directory's providers."""
        ...

    async def refresh(self, subnets: Iterable[str]) -> None:
        """Bring the providers of ``subnets`` up to date before a step."""
        ...

    def providers(self, subnet: str, offset: int) -> Sequence[Provider]:
        """The providers of ``subnet``, best first; ``offset`` may rotate equally good ones."""
        ...


class FixedProviders:
    """The same providers for every subnet (an operator's list, tests, benchmarks)."""

    def __init__(self, providers: Sequence[Provider | Peer]) -> None:
        self._providers = tuple(p if isinstance(p, Provider) else Provider(p) for p in providers)

    def serves(self, subnet: str) -> bool:
        return True

    async def refresh(self, subnets: Iterable[str]) -> None:
        return None

    def providers(self, subnet: str, offset: int) -> Sequence[Provider]:
        pool = self._providers
        cut = offset % len(pool) if pool else 0
        return pool[cut:] + pool[:cut]


class MetagraphProviders:
    """The serving neurons of netuid ``netuid``'s metagraph."""

    def __init__(self, read: MetagraphReader, netuid: int) -> None:
        self._read = read
        self.netuid = netuid
        self._providers: tuple[Provider, ...] = ()

    def serves(self, subnet: str) -> bool:
        return True

    async def refresh(self, subnets: Iterable[str]) -> None:
        try:
            snapshot = await self._read(self.netuid)
        except Exception as exc:  # an unreadable metagraph must not stop the step
            log.warning("cannot read the providers on netuid %s: %s", self.netuid, exc)
            return
        self._providers = providers_of(snapshot)

    def providers(self, subnet: str, offset: int) -> Sequence[Provider]:
        return self._providers


class ProviderTable:
    """The adapters table: a directory per subnet, ``"*"`` for every other subnet."""

    def __init__(self, entries: Mapping[str, ProviderDirectory]) -> None:
        self._entries = dict(entries)

    def _entry(self, subnet: str) -> ProviderDirectory | None:
        return self._entries.get(subnet, self._entries.get(EVERY_SUBNET))

    def serves(self, subnet: str) -> bool:
        entry = self._entry(subnet)
        return entry is not None and entry.serves(subnet)

    async def refresh(self, subnets: Iterable[str]) -> None:
        needed: dict[int, tuple[ProviderDirectory, list[str]]] = {}
        for subnet in sorted(set(subnets)):
            entry = self._entry(subnet)
            if entry is not None:
                needed.setdefault(id(entry), (entry, []))[1].append(subnet)
        for entry, names in needed.values():  # each directory once, however many subnets it serves
            await entry.refresh(names)

    def providers(self, subnet: str, offset: int) -> Sequence[Provider]:
        entry = self._entry(subnet)
        return () if entry is None else entry.providers(subnet, offset)


def providers_of(snapshot: MetagraphSnapshot) -> tuple[Provider, ...]:
    serving = [n for n in snapshot.neurons if n.axon is not None]
    serving.sort(key=lambda n: (-n.stake, n.uid))
    return tuple(Provider(Peer.from_neuron(n), n.coldkey) for n in serving)
