"""``dagnet subnet create | register | stake``: make a subnet and put a wallet's hotkey on it.

Each of the three moves TAO: the network must be named, and on finney or test the
command asks first (``--yes`` in scripts; :func:`~neurons.commands.network.paying_network`)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from neurons.commands.common import print_json
from neurons.commands.network import (
    DevKeyOpt,
    EndpointOpt,
    HotkeyOpt,
    NetuidOpt,
    NetworkOpt,
    PayingNetworkOpt,
    WalletOpt,
    WalletPathOpt,
    YesOpt,
    load_wallet,
    network_of,
    paying_network,
    run_on_chain,
)

subnet_app = typer.Typer(
    help="Subnet creation, registration and stake: the network must be named; finney and test ask first (--yes).",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(subnet_app, name="subnet")


def _chain(
    network: str | None,
    endpoint: str | None,
    netuid: int,
    name: str,
    hotkey: str,
    path: str | None,
    dev_key: str | None,
    *,
    yes: bool,
    doing: str,
) -> Any:
    """The chain for a command that moves value, once it is named and (live) confirmed."""
    from chain.sdk import SdkChain

    chosen = paying_network(network, endpoint, yes=yes, doing=doing)
    return SdkChain.open(chosen, load_wallet(name, hotkey, path, dev_key), netuid)


@subnet_app.command("list")
def subnet_list(network: NetworkOpt = None, endpoint: EndpointOpt = None) -> None:
    """Every subnet on the chain and its owner's coldkey, as JSON."""
    from chain.sdk import SdkChain

    chain = SdkChain.open(network_of(network, endpoint), None, 0, retries=0)
    owners = run_on_chain(chain, chain.subnet_owners())
    print_json([{"netuid": netuid, "owner_coldkey": owner} for netuid, owner in owners.items()])


@subnet_app.command("create")
def subnet_create(
    network: PayingNetworkOpt = None,
    endpoint: EndpointOpt = None,
    yes: YesOpt = False,
    wallet_name: WalletOpt = "default",
    wallet_hotkey: HotkeyOpt = "default",
    wallet_path: WalletPathOpt = None,
    dev_key: DevKeyOpt = None,
    new: Annotated[bool, typer.Option("--new", help="Create another subnet even if the coldkey owns one.")] = False,
    start: Annotated[bool, typer.Option("--start/--no-start", help="Call start_call once the chain allows it.")] = True,
    start_timeout: Annotated[
        float, typer.Option("--start-timeout", min=0, help="Seconds to wait for the chain's start-call delay.")
    ] = 300.0,
) -> None:
    """Create a subnet owned by the wallet's coldkey (its hotkey becomes uid 0) and start it; prints its netuid.

    A coldkey that owns a subnet already gets that one back ("created": false), started if it
    was not yet, unless --new. The chain takes the network registration cost from the coldkey.
    """
    chain = _chain(
        network, endpoint, 0, wallet_name, wallet_hotkey, wallet_path, dev_key, yes=yes, doing="subnet create"
    )
    print_json(run_on_chain(chain, _create(chain, new=new, start=start, start_timeout=start_timeout)))


async def _create(chain: Any, *, new: bool, start: bool, start_timeout: float) -> dict[str, Any]:
    from chain.sdk import SdkChain

    owned = [] if new else await chain.owned_subnets()
    netuid = owned[0] if owned else await chain.create_subnet()
    subnet = SdkChain(chain.client, chain.wallet, netuid)
    started = await subnet.started()
    if start and not started:
        await subnet.start(timeout_s=start_timeout)
        started = True
    return {
        "netuid": netuid,
        "created": not owned,
        "started": started,
        "owner_coldkey": chain.wallet.coldkeypub.ss58_address,
        "owner_hotkey": chain.hotkey,
    }


@subnet_app.command("register")
def subnet_register(
    network: PayingNetworkOpt = None,
    endpoint: EndpointOpt = None,
    yes: YesOpt = False,
    netuid: NetuidOpt = 1,
    wallet_name: WalletOpt = "default",
    wallet_hotkey: HotkeyOpt = "default",
    wallet_path: WalletPathOpt = None,
    dev_key: DevKeyOpt = None,
) -> None:
    """Register the wallet's hotkey on the subnet (burned registration, paid by its coldkey); prints its uid.

    A hotkey already on the subnet is not registered again (nothing is paid): its uid is
    printed with "new": false."""
    chain = _chain(
        network,
        endpoint,
        netuid,
        wallet_name,
        wallet_hotkey,
        wallet_path,
        dev_key,
        yes=yes,
        doing=f"subnet register (netuid {netuid})",
    )
    uid, new = run_on_chain(chain, _register(chain))
    print_json({"netuid": netuid, "hotkey": chain.hotkey, "uid": uid, "new": new})


async def _register(chain: Any) -> tuple[int, bool]:
    """The hotkey's uid, registering it first when the subnet's metagraph does not hold it."""
    held = (await chain.metagraph()).by_hotkey(chain.hotkey)
    if held is not None:
        return held.uid, False
    return await chain.register(), True


@subnet_app.command("stake")
def subnet_stake(
    amount: Annotated[float, typer.Argument(min=0, help="TAO to stake onto the wallet's hotkey.")],
    network: PayingNetworkOpt = None,
    endpoint: EndpointOpt = None,
    yes: YesOpt = False,
    netuid: NetuidOpt = 1,
    wallet_name: WalletOpt = "default",
    wallet_hotkey: HotkeyOpt = "default",
    wallet_path: WalletPathOpt = None,
    dev_key: DevKeyOpt = None,
) -> None:
    """Stake TAO from the wallet's coldkey onto its hotkey."""
    chain = _chain(
        network,
        endpoint,
        netuid,
        wallet_name,
        wallet_hotkey,
        wallet_path,
        dev_key,
        yes=yes,
        doing=f"subnet stake {amount:g} (netuid {netuid})",
    )
    run_on_chain(chain, chain.stake(amount))
    print_json({"netuid": netuid, "hotkey": chain.hotkey, "staked_tao": amount})
