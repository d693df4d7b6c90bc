"""``dagnet wallet create-dev NAME``: a throwaway wallet for development chains."""

from __future__ import annotations

from typing import Annotated

import typer

from neurons.commands.common import fail, print_json
from neurons.commands.network import WalletPathOpt

wallet_app = typer.Typer(help="Wallets for development chains.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(wallet_app, name="wallet")


@wallet_app.command("create-dev")
def wallet_create_dev(
    name: Annotated[str, typer.Argument(help="Wallet name.")],
    hotkey: Annotated[str, typer.Option("--wallet.hotkey", "--hotkey", help="Hotkey name.")] = "default",
    path: WalletPathOpt = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace existing key files.")] = False,
) -> None:
    """Create a coldkey and a hotkey with no password: for development chains only, never real funds."""
    import bittensor as bt

    wallet = bt.Wallet(name, hotkey, **({"path": path} if path else {}))
    try:
        wallet.create_new_coldkey(use_password=False, overwrite=overwrite, suppress=True)
        wallet.create_new_hotkey(use_password=False, overwrite=overwrite, suppress=True)
    except Exception as exc:  # the SDK refuses to overwrite with its own exception types
        fail(f"wallet {name}/{hotkey}: {exc}")
    print_json(
        {
            "name": name,
            "hotkey": hotkey,
            "path": wallet.path,
            "coldkey_ss58": wallet.coldkeypub.ss58_address,
            "hotkey_ss58": wallet.hotkey.ss58_address,
        }
    )
