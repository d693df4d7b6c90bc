"""Miners served on loopback under one metagraph, for tests of a validator loop."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from miner.app import create_app
from miner.metagraph import StaticMetagraph
from miner.settings import MinerSettings
from planners import load_planner
from protocol.metagraph import MetagraphSnapshot
from subnets.registry import default_registry
from support.keys import Keypair, MetagraphBuilder
from support.peers import serve_asgi, serving


async def serve_miners(
    validator: Keypair,
    miners: Mapping[str, Keypair] | Sequence[tuple[Any, Keypair]],
    stack: contextlib.AsyncExitStack,
    *,
    permit: bool = True,
    wrap: Callable[[Any, Any], Any] = lambda app, planner: app,
) -> tuple[MetagraphSnapshot, MetagraphSnapshot]:
    """Each of ``miners`` (a planner, or its name, and a key) served on loopback until
    ``stack`` closes: the metagraph without axons (what the miners check callers against,
    the validator holding a permit when ``permit``) and with them. ``wrap(app, planner)``
    may put a layer around each miner's app."""
    pairs = list(miners.items()) if isinstance(miners, Mapping) else list(miners)
    builder = MetagraphBuilder(netuid=7).neuron(validator, stake=1_000.0, validator_permit=permit)
    for _, key in pairs:
        builder.miner(key)
    bare = builder.build()
    urls = {}
    for planner, key in pairs:
        app = create_app(
            MinerSettings(port=0),
            keypair=key,
            metagraph=StaticMetagraph(bare),
            registry=default_registry(),
            planner=load_planner(planner) if isinstance(planner, str) else planner,
        )
        urls[key.ss58_address] = await stack.enter_async_context(serve_asgi(wrap(app, planner)))
    return bare, serving(bare, urls)
