"""A miner app served on a loopback port, and a client that signs like a validator.

    async with running_miner() as m:            # validator //Alice, miner //Bob
        r = await m.post("/NodeSynapse", {...})  # signed by the validator
        r = await m.post(..., signer=other, age_s=60)

The planner is :class:`FakePlanner` unless one is given, so these tests do not
depend on the reference planners.
"""

from __future__ import annotations

import contextlib
import functools
import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
from fastapi import FastAPI

from miner.app import create_app
from miner.metagraph import StaticMetagraph
from miner.serving import EVERY_TOOL
from miner.settings import MinerSettings
from planners.base import PlanProposal
from protocol.metagraph import MetagraphSnapshot
from protocol.plan import PlanNode, WorkflowPlan
from protocol.synapse import TaskPackage
from subnets.registry import default_registry

from .keys import Keypair, MetagraphBuilder, dev_keypair, signed_headers
from .peers import serve_asgi


class FakePlanner:
    """One ``text_transform`` node on the first allowed subnet, returning the description."""

    name = "fake"

    def plan(self, package: TaskPackage) -> PlanProposal:
        subnets = package.constraints.allowed_subnets or sorted(package.available_tools) or ["sn1"]
        node = PlanNode(
            id="step_1", subnet=subnets[0], action="text_transform", params={"op": "strip", "text": package.description}
        )
        return PlanProposal(WorkflowPlan(nodes=[node]), 0.001, 0.1, 0.9, "a single text node")


def default_snapshot(validator: Keypair, miner: Keypair) -> MetagraphSnapshot:
    return MetagraphBuilder(netuid=7).validator(validator, stake=1_000.0).miner(miner).build()


@dataclass
class MinerUnderTest:
    url: str
    app: FastAPI
    keypair: Keypair
    validator: Keypair
    metagraph: StaticMetagraph
    client: httpx.AsyncClient

    async def post(
        self,
        path: str,
        body: bytes | dict[str, Any],
        *,
        signer: Keypair | None = None,
        receiver: Keypair | str | None = None,
        age_s: float = 0.0,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """POST ``body`` signed by ``signer`` (default: the validator) for ``receiver``
        (default: this miner); ``headers`` replaces the signed headers entirely."""
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        if headers is None:
            headers = signed_headers(signer or self.validator, receiver or self.keypair, path, raw, age_s=age_s)
        return await self.client.post(self.url + path, content=raw, headers=headers)

    async def get(self, path: str) -> httpx.Response:
        return await self.client.get(self.url + path)


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every client this helper makes (the miner speaks plain HTTP on
    loopback): httpx otherwise builds one a client, reading the CA bundle, ~20 ms of CPU."""
    return ssl.create_default_context()


@contextlib.asynccontextmanager
async def running_miner(
    *,
    settings: MinerSettings | None = None,
    snapshot: MetagraphSnapshot | None | bool = True,
    planner: Any = None,
    auth_enabled: bool = True,
) -> AsyncIterator[MinerUnderTest]:
    """Serve a miner (hotkey //Bob) whose metagraph has validator //Alice.

    ``snapshot=True`` uses :func:`default_snapshot`; ``None`` means not synced.
    Without ``settings`` the miner serves every tool (:data:`~miner.serving.EVERY_TOOL`).
    """
    validator, miner = dev_keypair("Alice"), dev_keypair("Bob")
    if snapshot is True:
        snapshot = default_snapshot(validator, miner)
    metagraph = StaticMetagraph(snapshot or None)
    app = create_app(
        settings or MinerSettings(port=0, serve=EVERY_TOOL),
        keypair=miner,
        metagraph=metagraph,
        registry=default_registry(),
        planner=planner or FakePlanner(),
        auth_enabled=auth_enabled,
    )
    try:
        async with serve_asgi(app) as url, httpx.AsyncClient(timeout=10.0, verify=_tls()) as client:
            yield MinerUnderTest(url, app, miner, validator, metagraph, client)
    finally:
        app.state.planning.close()
