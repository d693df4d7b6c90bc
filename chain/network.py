"""Choosing a chain the Bittensor way: ``finney``, ``test``, ``local``, a ``ws://`` URL, or ``embedded[:PATH]``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_EMBEDDED_STATE = Path(os.environ.get("DAGNET_HOME", Path.home() / ".dagnet")) / "chain.sqlite"


@dataclass(frozen=True, slots=True)
class Network:
    """Where a neuron's chain is: a network name or URL for ``bt.Client``, or an embedded state file."""

    name: str
    embedded_state: Path | None = None

    @property
    def is_embedded(self) -> bool:
        return self.embedded_state is not None


def parse_network(value: str | None, endpoint: str | None = None) -> Network:
    """``endpoint`` (``--subtensor.chain_endpoint``) wins over ``value``; then ``BT_NETWORK``; then ``finney``.

    Raises ``ValueError`` for a name that is none of the accepted forms.
    """
    chosen = endpoint or value or os.environ.get("BT_NETWORK") or "finney"
    if chosen == "embedded" or chosen.startswith("embedded:"):
        _, _, path = chosen.partition(":")
        return Network("embedded", Path(path).expanduser() if path else DEFAULT_EMBEDDED_STATE)
    if chosen in ("finney", "test", "local", "archive", "devnet") or chosen.startswith(("ws://", "wss://")):
        return Network(chosen)
    raise ValueError(
        f"unknown network {chosen!r}: use finney, test, local, a ws:// or wss:// URL, or embedded[:PATH]"
    )
