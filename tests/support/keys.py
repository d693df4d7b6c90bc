"""Real sr25519 keypairs, signed requests and in-memory metagraphs for tests.

Import from any test module as ``from support.keys import ...`` (pytest's default
``prepend`` import mode puts ``tests/`` on ``sys.path``).

Keys are real: dev keys are derived from ``//name`` URIs (stable addresses across
runs, ``//Alice`` is the well-known one), fresh keys from a newly generated
mnemonic. Derivation costs a few milliseconds, so dev keys are cached.

Typical use::

    validator, miner = dev_keypair("Alice"), dev_keypair("Bob")
    snapshot = (MetagraphBuilder(netuid=7)
                .validator(validator, stake=5_000)
                .miner(miner, axon=Axon("127.0.0.1", 8091))
                .build())
    headers = signed_headers(validator, miner, "/NodeSynapse", body)
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable

import bittensor as bt
from bittensor.sp_core import Keypair

from protocol.metagraph import Axon, MetagraphSnapshot, Neuron

__all__ = [
    "Keypair",
    "MetagraphBuilder",
    "dev_keypair",
    "dev_keypairs",
    "fresh_keypair",
    "signed_headers",
]


@functools.cache
def dev_keypair(name: str) -> Keypair:
    """The keypair of the dev URI ``//<name>`` (``"Alice"`` → ``//Alice``); cached."""
    return Keypair.create_from_uri(f"//{name}")


def dev_keypairs(count: int, *, prefix: str = "dagnet-test") -> list[Keypair]:
    """``count`` distinct, stable keypairs: ``//<prefix>-0`` … ``//<prefix>-<count-1>``."""
    return [dev_keypair(f"{prefix}-{i}") for i in range(count)]


def fresh_keypair() -> Keypair:
    """A keypair from a newly generated mnemonic: never seen before, never cached."""
    return Keypair.create_from_mnemonic(Keypair.generate_mnemonic())


def signed_headers(
    signer: Keypair,
    receiver: Keypair | str,
    path: str,
    body: bytes = b"",
    *,
    method: str = "POST",
    nonce_ns: int | None = None,
    age_s: float = 0.0,
) -> dict[str, str]:
    """``btauth/1`` headers for one request from ``signer`` to ``receiver``.

    ``age_s`` back-dates the nonce (a stale request when it exceeds the
    receiver's freshness window); ``nonce_ns`` pins it (to replay a request).
    Adds ``Content-Type: application/json``.
    """
    if nonce_ns is None and age_s:
        nonce_ns = time.time_ns() - int(age_s * 1e9)
    receiver_ss58 = receiver if isinstance(receiver, str) else receiver.ss58_address
    headers = bt.http_auth.sign(
        signer, method=method, path=path, body=body, receiver_ss58=receiver_ss58, nonce_ns=nonce_ns
    )
    headers["Content-Type"] = "application/json"
    return headers


class MetagraphBuilder:
    """Builds a :class:`MetagraphSnapshot` neuron by neuron; uids are assigned in order.

    Every method returns the builder, so calls chain. ``build`` may be called
    repeatedly (e.g. with a later ``block``) to get snapshots that share neurons.
    """

    def __init__(self, *, netuid: int = 1, block: int = 100) -> None:
        self._netuid = netuid
        self._block = block
        self._neurons: list[Neuron] = []

    def neuron(
        self,
        key: Keypair | str,
        *,
        stake: float = 0.0,
        validator_permit: bool = False,
        axon: Axon | None = None,
        uid: int | None = None,
    ) -> MetagraphBuilder:
        """Add any neuron; ``key`` is a keypair or an ss58 address."""
        hotkey = key if isinstance(key, str) else key.ss58_address
        if any(n.hotkey == hotkey for n in self._neurons):
            raise ValueError(f"hotkey {hotkey} is already in the metagraph")
        uid = len(self._neurons) if uid is None else uid
        if any(n.uid == uid for n in self._neurons):
            raise ValueError(f"uid {uid} is already taken")
        self._neurons.append(Neuron(uid=uid, hotkey=hotkey, stake=stake, validator_permit=validator_permit, axon=axon))
        return self

    def validator(self, key: Keypair | str, *, stake: float = 1_000.0, **kwargs) -> MetagraphBuilder:
        """A neuron with a validator permit and (by default) ample stake."""
        return self.neuron(key, stake=stake, validator_permit=True, **kwargs)

    def miner(self, key: Keypair | str, *, axon: Axon | None = None, **kwargs) -> MetagraphBuilder:
        """A neuron without a validator permit, optionally serving ``axon``."""
        return self.neuron(key, axon=axon, **kwargs)

    def miners(
        self, keys: Iterable[Keypair | str], *, host: str = "127.0.0.1", ports: Iterable[int] = ()
    ) -> MetagraphBuilder:
        """Add many miners; the i-th gets an axon on ``ports[i]`` when ports are given."""
        port_list = list(ports)
        for i, key in enumerate(keys):
            self.miner(key, axon=Axon(host, port_list[i]) if i < len(port_list) else None)
        return self

    def build(self, *, block: int | None = None) -> MetagraphSnapshot:
        return MetagraphSnapshot(
            netuid=self._netuid,
            block=self._block if block is None else block,
            neurons=tuple(self._neurons),
        )
