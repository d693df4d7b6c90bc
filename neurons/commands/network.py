"""Choosing a chain and a wallet on the command line, the Bittensor way.

``--network`` (or ``--subtensor.network``; ``BT_NETWORK``) takes ``finney``,
``test``, ``local``, a ``ws://`` URL or ``embedded[:PATH]``;
``--subtensor.chain_endpoint`` overrides it. The wallet is ``--wallet.name`` /
``--wallet.hotkey`` / ``--wallet.path`` (``BT_WALLET``, ``BT_WALLET_HOTKEY``,
``BT_WALLET_PATH``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Annotated, Any, Optional, TypeVar

import typer

from chain.base import ChainError
from chain.network import Network, parse_network
from neurons.commands.common import fail

T = TypeVar("T")

NetworkOpt = Annotated[
    Optional[str],
    typer.Option(
        "--network", "--subtensor.network", envvar="BT_NETWORK",
        help="finney | test | local | ws://URL | embedded[:PATH].  [default: finney]",
    ),
]
EndpointOpt = Annotated[Optional[str], typer.Option("--subtensor.chain_endpoint", help="A ws:// URL; overrides --network.")]
NetuidOpt = Annotated[int, typer.Option("--netuid", help="The subnet.")]
WalletOpt = Annotated[str, typer.Option("--wallet.name", "--wallet-name", envvar="BT_WALLET", help="Wallet (coldkey) name.")]
HotkeyOpt = Annotated[str, typer.Option("--wallet.hotkey", "--wallet-hotkey", envvar="BT_WALLET_HOTKEY", help="Hotkey name.")]
WalletPathOpt = Annotated[
    Optional[str],
    typer.Option("--wallet.path", "--wallet-path", envvar="BT_WALLET_PATH", help="Wallets directory.  [default: ~/.bittensor/wallets]"),
]


NeuronWalletOpt = Annotated[
    Optional[str],
    typer.Option("--wallet.name", "--wallet-name", help="Wallet (coldkey) name (instead of --dev-key).  [default: none]"),
]
"""A neuron's wallet: no default and no environment variable, because a neuron takes a wallet *or* ``--dev-key``."""

DevKeyOpt = Annotated[
    Optional[str],
    typer.Option("--dev-key", help="A development key URI (//Alice) instead of a wallet: a local subtensor pre-funds these.  [default: none]"),
]


def network_of(network: str | None, endpoint: str | None) -> Network:
    try:
        return parse_network(network, endpoint)
    except ValueError as exc:
        fail(str(exc))


def load_wallet(name: str, hotkey: str, path: str | None, dev_key: str | None = None) -> Any:
    """A wallet whose hotkey and coldkey address are readable now (:func:`neurons.keys.open_wallet`);
    a key that cannot be loaded is an input error."""
    from neurons.keys import open_wallet

    try:
        wallet = open_wallet(dev_key, name, hotkey, path)
        wallet.coldkeypub  # noqa: B018
    except ValueError as exc:
        fail(str(exc))
    except Exception as exc:  # the SDK raises several kinds for a missing or unreadable coldkey file
        fail(f"wallet {name}: cannot load the coldkey: {exc}")
    return wallet


def run_on_chain(chain: Any, work: Awaitable[T]) -> T:
    """Run ``work``, close ``chain``; a chain error becomes the command's one-line error.

    Retries are quiet (a command's stderr is for its one error line)."""
    logging.basicConfig(level=logging.ERROR)

    async def run() -> T:
        try:
            return await work
        finally:
            await chain.close()

    try:
        return asyncio.run(run())
    except ChainError as exc:
        fail(str(exc))
