"""``dagnet subnet register | stake``: put a wallet's hotkey on a subnet (development networks)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from neurons.commands.common import print_json
from neurons.commands.network import (
    DevKeyOpt, EndpointOpt, HotkeyOpt, NetuidOpt, NetworkOpt, WalletOpt, WalletPathOpt, load_wallet, network_of,
    run_on_chain,
)

subnet_app = typer.Typer(help="Registration and stake (development networks).", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(subnet_app, name="subnet")


def _chain(
    network: str | None, endpoint: str | None, netuid: int, name: str, hotkey: str, path: str | None, dev_key: str | None,
) -> Any:
    from chain.sdk import SdkChain

    return SdkChain.open(network_of(network, endpoint), load_wallet(name, hotkey, path, dev_key), netuid)


@subnet_app.command("register")
def subnet_register(
    network: NetworkOpt = None, endpoint: EndpointOpt = None, netuid: NetuidOpt = 1,
    wallet_name: WalletOpt = "default", wallet_hotkey: HotkeyOpt = "default", wallet_path: WalletPathOpt = None,
    dev_key: DevKeyOpt = None,
) -> None:
    """Register the wallet's hotkey on the subnet (burned registration, paid by its coldkey); prints its uid."""
    chain = _chain(network, endpoint, netuid, wallet_name, wallet_hotkey, wallet_path, dev_key)
    uid = run_on_chain(chain, chain.register())
    print_json({"netuid": netuid, "hotkey": chain.hotkey, "uid": uid})


@subnet_app.command("stake")
def subnet_stake(
    amount: Annotated[float, typer.Argument(min=0, help="TAO to stake onto the wallet's hotkey.")],
    network: NetworkOpt = None, endpoint: EndpointOpt = None, netuid: NetuidOpt = 1,
    wallet_name: WalletOpt = "default", wallet_hotkey: HotkeyOpt = "default", wallet_path: WalletPathOpt = None,
    dev_key: DevKeyOpt = None,
) -> None:
    """Stake TAO from the wallet's coldkey onto its hotkey."""
    chain = _chain(network, endpoint, netuid, wallet_name, wallet_hotkey, wallet_path, dev_key)
    run_on_chain(chain, chain.stake(amount))
    print_json({"netuid": netuid, "hotkey": chain.hotkey, "staked_tao": amount})
