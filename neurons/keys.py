"""Keys for development: a dev key URI (``//Alice``) standing in for a wallet."""

from __future__ import annotations

from typing import Any


class DevWallet:
    """What the SDK reads from a ``bt.Wallet``, for one dev key: hotkey and coldkey are the same key."""

    def __init__(self, keypair: Any) -> None:
        self.hotkey = keypair
        self.coldkey = keypair
        self.coldkeypub = keypair
