"""``dagnet chain start | status``: run the embedded development chain, or look at any chain."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console

from chain.network import DEFAULT_EMBEDDED_STATE
from neurons.commands.common import fail, print_json
from neurons.commands.network import EndpointOpt, NetuidOpt, NetworkOpt, network_of, run_on_chain
from render.columns import ALWAYS, Column, fit_table

chain_app = typer.Typer(help="Run the embedded development chain, or look at any chain.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(chain_app, name="chain")


@chain_app.command("start")
def chain_start(
    state: Annotated[
        Optional[Path], typer.Option("--state", help=f"State file.  [default: {DEFAULT_EMBEDDED_STATE}]")
    ] = None,
    block_time: Annotated[
        Optional[float], typer.Option("--block-time", min=0.01, help="Seconds per block.  [default: 12]")
    ] = None,
    tempo: Annotated[int, typer.Option(min=1, help="Blocks per epoch (genesis of a new state file).")] = 100,
    weights_rate_limit: Annotated[int, typer.Option(min=0, help="Blocks between two weights of one validator.")] = 20,
    immunity_period: Annotated[
        int, typer.Option(min=0, help="Blocks during which a new uid cannot be replaced.")
    ] = 1000,
    netuid: NetuidOpt = 1,
    subnet: Annotated[
        bool,
        typer.Option(
            "--subnet/--no-subnet",
            help="Genesis with the subnet made and started, or with none (`dagnet subnet create` makes it).",
        ),
    ] = True,
    start_call_delay: Annotated[
        int, typer.Option(min=0, help="Blocks between a subnet's creation and its start_call.")
    ] = 10,
    host: Annotated[str, typer.Option(help="Address of the node's RPC.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="RPC port; 0 picks a free one.")] = 0,
) -> None:
    """Run the embedded development chain until interrupted; a new state file gets a genesis."""
    from chain.embedded.genesis import Genesis
    from chain.embedded.lock import NodeError
    from chain.embedded.node import serve

    genesis = Genesis(
        netuid=netuid,
        tempo=tempo,
        weights_rate_limit=weights_rate_limit,
        immunity_period=immunity_period,
        block_time=12.0 if block_time is None else block_time,
        subnet_at_genesis=subnet,
        start_call_delay=start_call_delay,
    )
    try:
        serve(
            state or DEFAULT_EMBEDDED_STATE,
            block_time=block_time,
            genesis=genesis,
            host=host,
            port=port,
            announce=lambda line: print(line, file=sys.stderr, flush=True),
        )
    except (NodeError, OSError) as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        pass


@chain_app.command("status")
def chain_status(
    network: NetworkOpt = None,
    endpoint: EndpointOpt = None,
    netuid: NetuidOpt = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of a table.")] = False,
) -> None:
    """The head block, tempo and every neuron's stake, permit, incentive and emission."""
    from chain.sdk import SdkChain

    chain = SdkChain.open(network_of(network, endpoint), None, netuid, retries=0)
    status = run_on_chain(chain, status_of(chain))
    print_json(status) if as_json else render_status(status, Console())


async def status_of(chain: Any) -> dict[str, Any]:
    snapshot = await chain.metagraph()
    hyper = await chain.hyperparameters()
    return {
        "netuid": snapshot.netuid,
        "block": snapshot.block,
        "tempo": hyper.tempo,
        "blocks_until_epoch": await chain.blocks_until_epoch(),
        "weights_rate_limit": hyper.weights_rate_limit,
        "immunity_period": hyper.immunity_period,
        "commit_reveal_enabled": hyper.commit_reveal_enabled,
        "neurons": [
            {
                "uid": n.uid,
                "hotkey": n.hotkey,
                "coldkey": n.coldkey,
                "stake": n.stake,
                "validator_permit": n.validator_permit,
                "incentive": n.incentive,
                "dividends": n.dividends,
                "emission": n.emission,
                "trust": n.trust,
                "consensus": n.consensus,
                "axon": n.axon.url if n.axon else None,
                "last_update": n.last_update,
                "registered_block": n.registered_block,
            }
            for n in snapshot.neurons
        ],
    }


STATUS_COLUMNS = (
    Column("uid", lambda n: str(n["uid"]), ALWAYS),
    Column("hotkey", lambda n: n["hotkey"], 5, short=lambda n: n["hotkey"][:10] + "…", justify="left"),
    Column("stake", lambda n: f"{n['stake']:.3f}", ALWAYS),
    Column("permit", lambda n: "yes" if n["validator_permit"] else "", 3, justify="left"),
    Column("incentive", lambda n: f"{n['incentive']:.4f}", ALWAYS),
    Column("dividends", lambda n: f"{n['dividends']:.4f}", 2),
    Column("emission", lambda n: f"{n['emission']:.4f}", ALWAYS),
    Column(
        "axon", lambda n: n["axon"] or "", 4, short=lambda n: (n["axon"] or "").removeprefix("http://"), justify="left"
    ),
)
"""At 80 columns: hotkeys shortened, axons without the scheme, then dividends and permit dropped."""


def render_status(status: dict[str, Any], console: Console) -> None:
    console.print(
        f"netuid {status['netuid']} · block {status['block']} · tempo {status['tempo']} "
        f"(next epoch in {status['blocks_until_epoch']}) · weights rate limit {status['weights_rate_limit']}",
        highlight=False,
    )
    console.print(fit_table(STATUS_COLUMNS, status["neurons"], console.width))
