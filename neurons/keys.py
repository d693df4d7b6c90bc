"""The key a neuron or a command signs with: a wallet, or a dev key URI (``//Alice``) standing in for one."""

from __future__ import annotations

from typing import Any


class DevWallet:
    """What the SDK reads from a ``bt.Wallet``, for one dev key: hotkey and coldkey are the same key."""

    def __init__(self, keypair: Any) -> None:
        self.hotkey = keypair
        self.coldkey = keypair
        self.coldkeypub = keypair


def open_wallet(dev_key: str | None, name: str | None, hotkey: str = "default", path: str | None = None) -> Any:
    """The dev key's :class:`DevWallet` when ``dev_key`` is given, else the ``bt.Wallet`` ``name``/``hotkey``
    with its hotkey loaded now.

    Raises ``ValueError`` saying which key could not be loaded and why.
    """
    if dev_key is not None:
        from bittensor.sp_core import Keypair

        try:
            return DevWallet(Keypair.create_from_uri(dev_key))
        except Exception as exc:  # the SDK raises its own types for a bad URI
            raise ValueError(f"--dev-key {dev_key!r}: not a usable key URI: {exc}") from None
    import bittensor as bt

    if name is None:
        raise ValueError("no key: give a dev key or a wallet name")
    wallet = bt.Wallet(name, hotkey, **({"path": path} if path else {}))
    try:
        wallet.hotkey  # noqa: B018
    except Exception as exc:  # missing, unreadable or encrypted key files: the SDK's own types
        raise ValueError(f"wallet {name}/{hotkey}: cannot load the hotkey: {exc}") from None
    return wallet
