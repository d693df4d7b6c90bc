"""Whether a miner can take part in its subnet, and if not, why.

Ready means: a metagraph snapshot is at hand and this miner's hotkey is registered
in it. ``/health`` answers 503 with the reason while a miner is not ready, and the
miner says the same at start. Whoever supplies the metagraph (a file today, the
chain later) supplies the snapshot and, when it has none, the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.metagraph import MetagraphSnapshot

__all__ = ["Readiness", "readiness"]


@dataclass(frozen=True, slots=True)
class Readiness:
    """``uid`` once registered; ``reason`` says what is missing (None when ready)."""

    uid: int | None
    reason: str | None

    @property
    def ready(self) -> bool:
        return self.reason is None


def readiness(snapshot: MetagraphSnapshot | None, hotkey: str, problem: str | None = None) -> Readiness:
    """The readiness of the miner with ``hotkey``; ``problem`` says why there is no snapshot."""
    if snapshot is None:
        return Readiness(None, problem or "no metagraph yet")
    neuron = snapshot.by_hotkey(hotkey)
    if neuron is None:
        return Readiness(None, f"hotkey {hotkey} is not registered on netuid {snapshot.netuid}")
    return Readiness(neuron.uid, None)
