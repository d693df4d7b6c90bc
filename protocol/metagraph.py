"""A read-only snapshot of the subnet's metagraph, as neurons see it.

The chain layer (bittensor or the embedded devnet) produces these; the miner's
blacklist and the validator's sampling only ever read a snapshot. A :class:`Peer`
is a neuron as the validator addresses it: uid, hotkey and URL.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Axon:
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Neuron:
    """One uid of the subnet. Scores are fractions in [0, 1]; stake and emission in
    the subnet's token (alpha on a dynamic subnet); blocks are chain block numbers."""

    uid: int
    hotkey: str
    stake: float = 0.0
    validator_permit: bool = False
    axon: Axon | None = None
    registered_block: int | None = None
    """The block this hotkey registered at, when the chain says (immunity starts there)."""
    coldkey: str = ""
    incentive: float = 0.0
    dividends: float = 0.0
    emission: float = 0.0
    """What the last epoch paid this uid."""
    trust: float = 0.0
    consensus: float = 0.0
    last_update: int = 0
    """The block of this uid's last weights (0: never)."""


@dataclass(frozen=True, slots=True)
class Peer:
    """A neuron one talks to over HTTP: a miner a validator queries, or a tool provider it calls."""

    uid: int
    hotkey: str
    url: str

    @classmethod
    def from_neuron(cls, neuron: Neuron) -> Peer:
        if neuron.axon is None:
            raise ValueError(f"uid {neuron.uid} serves no axon")
        return cls(uid=neuron.uid, hotkey=neuron.hotkey, url=neuron.axon.url)


@dataclass(frozen=True, slots=True)
class MetagraphSnapshot:
    netuid: int
    block: int
    neurons: tuple[Neuron, ...] = ()
    _by_hotkey: dict[str, Neuron] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_hotkey.update({n.hotkey: n for n in self.neurons})

    def by_hotkey(self, hotkey: str) -> Neuron | None:
        return self._by_hotkey.get(hotkey)

    def by_uid(self, uid: int) -> Neuron | None:
        for neuron in self.neurons:
            if neuron.uid == uid:
                return neuron
        return None
