"""Choosing a chain and a wallet on the command line, the Bittensor way.

``--network`` (or ``--subtensor.network``; ``BT_NETWORK``) takes ``finney``,
``test``, ``local``, a ``ws://`` URL or ``embedded[:PATH]``;
``--subtensor.chain_endpoint`` overrides it. The wallet is ``--wallet.name`` /
``--wallet.hotkey`` / ``--wallet.path`` (``BT_WALLET``, ``BT_WALLET_HOTKEY``,
``BT_WALLET_PATH``).

One rule for the network's default, and every help text says it:

- a command that only reads (``chain status``, ``subnet list``) defaults to ``finney``;
- a neuron (``miner``, ``validator``) has no default: it needs ``--network`` or
  ``BT_NETWORK`` (a miner may follow a ``--metagraph-file`` instead), and never picks
  a chain on its own;
- a command that moves value (``subnet create | register | stake``) has no default
  either, and on a live network (:attr:`chain.network.Network.is_live`: finney, test, a
  ``wss://`` node) asks for confirmation, or takes ``--yes`` (:func:`paying_network`).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable
from typing import Annotated, Any, Optional, TypeVar

import typer

from chain.base import ChainError
from chain.network import NETWORK_FORMS, Network, parse_network
from neurons.commands.common import fail

T = TypeVar("T")

NetworkOpt = Annotated[
    Optional[str],
    typer.Option(
        "--network",
        "--subtensor.network",
        envvar="BT_NETWORK",
        help=f"{NETWORK_FORMS}.  [default: finney]",
    ),
]
NeuronNetworkOpt = Annotated[
    Optional[str],
    typer.Option(
        "--network",
        "--subtensor.network",
        envvar="BT_NETWORK",
        help=f"{NETWORK_FORMS}.  [default: none: --network or BT_NETWORK is required]",
    ),
]
"""A validator's chain: no default (it never picks one on its own)."""
MinerNetworkOpt = Annotated[
    Optional[str],
    typer.Option(
        "--network",
        "--subtensor.network",
        envvar="BT_NETWORK",
        help=f"{NETWORK_FORMS}: follow this chain's metagraph.  [default: none: --network, BT_NETWORK or --metagraph-file is required]",
    ),
]
"""A miner's chain: no default; ``--metagraph-file`` stands in for one."""
NO_METAGRAPH = (
    f"no metagraph to follow: name a network with --network ({NETWORK_FORMS}) or BT_NETWORK, or give --metagraph-file"
)
PayingNetworkOpt = Annotated[
    Optional[str],
    typer.Option(
        "--network",
        "--subtensor.network",
        envvar="BT_NETWORK",
        help=f"{NETWORK_FORMS}.  [default: none: --network or BT_NETWORK is required; finney and test also need --yes or a yes at the prompt]",
    ),
]
"""The chain of a command that moves value: no default."""
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do it on a live network (finney, test) without asking.")]
EndpointOpt = Annotated[
    Optional[str], typer.Option("--subtensor.chain_endpoint", help="A ws:// URL; overrides --network.")
]
NetuidOpt = Annotated[int, typer.Option("--netuid", help="The subnet.")]
WalletOpt = Annotated[
    str, typer.Option("--wallet.name", "--wallet-name", envvar="BT_WALLET", help="Wallet (coldkey) name.")
]
HotkeyOpt = Annotated[
    str, typer.Option("--wallet.hotkey", "--wallet-hotkey", envvar="BT_WALLET_HOTKEY", help="Hotkey name.")
]
WalletPathOpt = Annotated[
    Optional[str],
    typer.Option(
        "--wallet.path",
        "--wallet-path",
        envvar="BT_WALLET_PATH",
        help="Wallets directory.  [default: ~/.bittensor/wallets]",
    ),
]


NeuronWalletOpt = Annotated[
    Optional[str],
    typer.Option(
        "--wallet.name", "--wallet-name", help="Wallet (coldkey) name (instead of --dev-key).  [default: none]"
    ),
]
"""A neuron's wallet: no default and no environment variable, because a neuron takes a wallet *or* ``--dev-key``."""

DevKeyOpt = Annotated[
    Optional[str],
    typer.Option(
        "--dev-key",
        help="A development key URI (//Alice) instead of a wallet: a local subtensor pre-funds these.  [default: none]",
    ),
]


def network_of(network: str | None, endpoint: str | None, *, default: str | None = "finney") -> Network:
    """The chain named (``default`` when none is: ``None`` makes naming one required);
    a name that is none of the forms, or none at all, is an input error."""
    try:
        return parse_network(network, endpoint, default=default)
    except ValueError as exc:
        fail(str(exc))


def paying_network(network: str | None, endpoint: str | None, *, yes: bool, doing: str) -> Network:
    """The chain a command that moves value runs on: it must be named, and on a live
    network ``doing`` is confirmed at the prompt (or by ``--yes``); else an input error."""
    chosen = network_of(network, endpoint, default=None)
    if (
        chosen.is_live
        and not yes
        and not _confirmed(f"{doing} on {chosen.name} spends real TAO from the coldkey. Go on?")
    ):
        fail(f"{doing} on {chosen.name} moves real TAO: not confirmed (answer y at the prompt, or pass --yes)")
    return chosen


def _confirmed(question: str) -> bool:
    """A yes at the prompt; no terminal to ask at (a script, a pipe) is a no."""
    if not sys.stdin.isatty():
        return False
    try:
        return typer.confirm(question, default=False, err=True)
    except typer.Abort:
        return False


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
