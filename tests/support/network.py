"""Miners served on loopback under one metagraph, for tests of a validator loop."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence

from support.keys import Keypair, MetagraphBuilder
from support.peers import serve_asgi, serving

from miner.app import create_app
from miner.config import MinerSettings
from miner.metagraph import StaticMetagraph
from miner.planner import load_planner
from protocol.metagraph import MetagraphSnapshot
from subnets.registry import default_registry


async def serve_miners(
    validator: Keypair, miners: Mapping[str, Keypair] | Sequence[tuple[str, Keypair]], stack: contextlib.AsyncExitStack
) -> tuple[MetagraphSnapshot, MetagraphSnapshot]:
    """Each of ``miners`` (planner name and key) served on loopback until ``stack`` closes:
    the metagraph without axons (what the miners check callers against) and with them."""
    pairs = list(miners.items()) if isinstance(miners, Mapping) else list(miners)
    builder = MetagraphBuilder(netuid=7).validator(validator, stake=1_000.0)
    for _, key in pairs:
        builder.miner(key)
    bare = builder.build()
    urls = {}
    for name, key in pairs:
        app = create_app(MinerSettings(port=0), keypair=key, metagraph=StaticMetagraph(bare),
                         registry=default_registry(), planner=load_planner(name))
        urls[key.ss58_address] = await stack.enter_async_context(serve_asgi(app))
    return bare, serving(bare, urls)
