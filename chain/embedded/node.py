"""The embedded chain's node: one process that owns the state file, produces blocks and answers RPC.

Blocks come from a clock (``block_time`` seconds each); the epoch runs inside
block production. Clients find the node through the state file (its address is
written there at start), so a validator and miners started separately only
need the file's path (they read the head from it too). A second node on the
same file is refused: the file is locked while a node runs (:mod:`.lock`).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import uvicorn
from bittensor.sp_core import Keypair
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from . import reads
from .genesis import Genesis
from .lock import hold_node_locks, release_node_locks
from .state import ChainState, Refusal, StateDiscarded
from .wire import KEEP_ALIVE_S, RPC_PATH, block_from_hash, signing_payload

log = logging.getLogger("dagnet.chain")

SHUTDOWN_GRACE_S = 2
"""How long a stopping node waits for its connections to close. Every RPC is answered at
once, so what is left after this is idle; and uvicorn never tells a connection accepted
in the same turn as the stop to close, which would hold the node for that client's whole
keep-alive (30 s, in 8 of 20 stops with four clients connecting as fast as they could)."""


class Node:
    """Answers the RPC methods :class:`chain.embedded.substrate.EmbeddedSubstrate` sends.

    Everything runs on one event loop, so the state is touched by one task at a time.
    """

    def __init__(self, state: ChainState) -> None:
        self.state = state
        self.chain_id = state.meta()["genesis_time"]
        self._methods: dict[str, Callable[[dict], Any]] = {
            "info": self._info,
            "query": self._query,
            "query_map": self._query_map,
            "query_batch": self._query_batch,
            "runtime_call": self._runtime_call,
            "account_next_index": lambda p: self.state.next_nonce(p["address"]),
            "submit": self._submit,
        }

    def app(self) -> Starlette:
        return Starlette(routes=[Route(RPC_PATH, self._rpc, methods=["POST"])])

    async def _rpc(self, request: Request) -> Response:
        try:
            body = orjson.loads(await request.body())
            method = self._methods[body["method"]]
            return _json({"result": method(body.get("params") or {})})
        except StateDiscarded as exc:
            return _json({"error": {"kind": "discarded", "message": str(exc)}})
        except reads.NotServed as exc:
            return _json({"error": {"kind": "not_served", "message": str(exc)}})
        except (KeyError, TypeError, ValueError) as exc:
            return _json({"error": {"kind": "bad_request", "message": f"bad request: {exc!r}"}}, status_code=400)

    def _info(self, params: dict) -> dict:
        g = self.state.genesis
        return {"chain_id": self.chain_id, "block_time": g.block_time, "netuid": g.netuid, "head": self.state.head()}

    def _query(self, p: dict) -> Any:
        self.state.check_readable(block_from_hash(p.get("block_hash")))
        return reads.query(self.state, p["module"], p["name"], p.get("params") or [])

    def _query_map(self, p: dict) -> Any:
        self.state.check_readable(block_from_hash(p.get("block_hash")))
        return reads.query_map(self.state, p["module"], p["name"], p.get("params") or [])

    def _query_batch(self, p: dict) -> Any:
        self.state.check_readable(block_from_hash(p.get("block_hash")))
        return [reads.query(self.state, p["module"], p["name"], params) for params in p["param_sets"]]

    def _runtime_call(self, p: dict) -> Any:
        block = self.state.check_readable(block_from_hash(p.get("block_hash")))
        return reads.runtime_call(self.state, p["api"], p["method"], p["params"], block)

    def _submit(self, p: dict) -> dict:
        signer, nonce, (module, function, params) = p["signer"], int(p["nonce"]), p["call"]
        payload = signing_payload(self.chain_id, signer, nonce, module, function, params)
        if not Keypair(ss58_address=signer).verify(payload, bytes.fromhex(p["signature"])):
            return {"success": False, "name": "BadProof", "message": "Invalid signature for this call."}
        if module != "SubtensorModule":
            return {
                "success": False,
                "name": "CallNotServed",
                "message": f"the embedded chain does not implement {module}.{function}",
            }
        try:
            block, events = self.state.apply(signer, nonce, function, params)
        except Refusal as refusal:
            return {"success": False, "name": refusal.name, "message": refusal.message}
        return {"success": True, "block": block, "events": events}

    async def produce_blocks(self) -> None:
        """One block every ``block_time`` seconds, on a fixed schedule (no drift)."""
        period = self.state.genesis.block_time
        start = time.monotonic()
        produced = 0
        while True:
            produced += 1
            await asyncio.sleep(max(0.0, start + produced * period - time.monotonic()))
            block = self.state.produce_block()
            if self.state.blocks_until_epoch(block) == 0 and self.state.subnet_started_at() is not None:
                log.info("block %d: epoch ran", block)


def _json(content: Any, status_code: int = 200) -> Response:
    return Response(orjson.dumps(content), status_code=status_code, media_type="application/json")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def serve(
    path: Path,
    *,
    block_time: float | None = None,
    genesis: Genesis | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    announce: Callable[[str], None] = lambda line: None,
) -> None:
    """Run the node until interrupted (SIGINT, or SIGTERM, which ends it the same clean way:
    the state closed and the lock files removed). Creates the state (with ``genesis``) if
    the file is new."""
    path = Path(path)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)
    locks = hold_node_locks(path)
    try:  # a SIGTERM at any point from here on still removes the lock files
        state = ChainState(path, genesis)
        try:
            if block_time is not None:
                state.set_block_time(block_time)
            sock = socket.create_server((host, port))
            # Accepted connections inherit this: without it each small RPC answer waits out delayed ACKs.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            bound_host, bound_port = sock.getsockname()[:2]
            url = f"http://{bound_host}:{bound_port}"
            state.publish_url(url)
            node = Node(state)
            config = uvicorn.Config(
                node.app(),
                log_level="warning",
                access_log=False,
                lifespan="off",
                timeout_keep_alive=int(KEEP_ALIVE_S),
                timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
            )
            server = uvicorn.Server(config)
            if threading.current_thread() is threading.main_thread():
                # From the moment it says it listens, a SIGINT or SIGTERM stops it: uvicorn's own
                # handlers are installed only once it serves, and a signal in between (a loaded
                # machine, a quick supervisor) met asyncio's, which cancelled the starting task
                # without stopping the server: it then served on, idle, for good.
                for stop in (signal.SIGINT, signal.SIGTERM):
                    signal.signal(stop, server.handle_exit)
            announce(
                f"dagnet chain listening on {url} state={path} netuid={state.genesis.netuid} "
                f"block={state.head()} block_time={state.genesis.block_time}s tempo={state.genesis.tempo}"
            )

            async def main() -> None:
                producer = asyncio.create_task(node.produce_blocks())
                try:
                    await server.serve(sockets=[sock])
                finally:
                    producer.cancel()

            asyncio.run(main())
        finally:
            state.publish_url("")
            state.close()
    finally:
        release_node_locks(path, locks)
