"""``bittensor.Substrate`` for the embedded chain: the SDK's chain-access seam, served by our node.

``bt.Client(substrate=EmbeddedSubstrate(path))`` gives the very client a live
node gets: ``client.subnets.metagraph``, ``client.execute(bt.SetWeights(...))``
with its preflight, ``bt.ServeAxon``, ``bt.AddStake`` and raw calls all run
unchanged. Calls are signed by the caller's keypair and verified by the node.

Not served (each raises the SDK's ``ChainError`` saying so): MEV-shielded
submission (the SDK encrypts to an ML-KEM key and ships no decryption, so a
node of ours could not open the carrier), out-of-process signing
(``prepare``/``submit_signature``), multisig, SCALE decoding and pallet constants.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import aiohttp
import orjson
from bittensor.balance import Balance
from bittensor.result import ChainError, ExtrinsicResult, RpcConnectionError

from storage import open_shared

from .lock import node_running
from .state import meta_value
from .wire import KEEP_ALIVE_S, RPC_PATH, signing_payload
from .wire import block_hash as hash_of


@dataclass(frozen=True)
class ComposedCall:
    """A call ready to sign: the shape the SDK's fee filters read (module, function, params)."""

    module: str
    function: str
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def data(self) -> bytes:
        return signing_payload("", "", 0, self.module, self.function, self.params)


class EmbeddedSubstrate:
    """Talks to the node whose address is in the state file at ``path``."""

    def __init__(self, path: Path, *, timeout_s: float = 5.0) -> None:
        self.path = Path(path)
        self.token_symbols: dict[int, str] = {}
        self._timeout = timeout_s
        self._http: aiohttp.ClientSession | None = None
        self._url: str | None = None
        self._info: dict[str, Any] | None = None
        self._state: sqlite3.Connection | None = None

    def balance(self, rao: int, netuid: int = 0) -> Balance:
        return Balance(int(rao), netuid, self.token_symbols.get(netuid) if netuid else None)

    # -- lifecycle ------------------------------------------------------------------

    async def connect(self) -> None:
        await self._node_info()

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None
        if self._state is not None:
            self._state.close()
            self._state = None

    def _running_node_meta(self, key: str) -> str:
        """A value the running node published in the state file (its address, its head)."""
        if not self.path.exists():
            raise RpcConnectionError(f"no embedded chain state at {self.path}; start one with `dagnet chain start`")
        if self._state is None:
            self._state = open_shared(self.path)
        try:
            value = meta_value(self._state, key)
        except sqlite3.Error as exc:  # an empty or foreign file
            raise RpcConnectionError(f"{self.path} is not an embedded chain state file: {exc}") from None
        if not value or not node_running(self.path):
            raise RpcConnectionError(f"the embedded chain at {self.path} is not running")
        return value

    def _session(self) -> aiohttp.ClientSession:
        if self._http is None:
            # Idle connections are dropped before the node would close them
            # (KEEP_ALIVE_S), so no request goes out on a connection being closed.
            connector = aiohttp.TCPConnector(keepalive_timeout=KEEP_ALIVE_S / 2)
            self._http = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=self._timeout),
                json_serialize=lambda value: orjson.dumps(value).decode(),
            )
        return self._http

    async def _call(self, rpc: str, /, **params: Any) -> Any:
        if self._url is None:
            self._url = self._running_node_meta("rpc_url")
        try:
            async with self._session().post(self._url + RPC_PATH, json={"method": rpc, "params": params}) as response:
                body = await response.json(loads=orjson.loads, content_type=None)
        except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
            self._url = None  # the node may come back elsewhere: re-read the state file next time
            raise RpcConnectionError(f"embedded chain at {self.path} unreachable: {exc!r}") from exc
        error = body.get("error")
        if error is not None:
            raise ChainError(error["message"])
        return body["result"]

    async def _node_info(self) -> dict[str, Any]:
        if self._info is None:
            self._info = await self._call("info")
        return self._info

    # -- reads ------------------------------------------------------------------

    async def block_hash(self, block: Optional[int] = None) -> str:
        return hash_of(await self.block_number() if block is None else block)

    async def block_number(self) -> int:
        """Read from the state file, which the node writes once a block: no round trip."""
        return int(self._running_node_meta("head"))

    async def finalized_block_number(self) -> int:
        return await self.block_number()

    async def block_time(self) -> float:
        return float((await self._node_info())["block_time"])

    async def spec_version(self) -> int:
        return 1

    async def get_block(self, block_number: Optional[int] = None, block_hash: Optional[str] = None) -> Optional[dict]:
        number = block_number if block_number is not None else await self.block_number()
        return {"header": {"number": number, "hash": hash_of(number)}, "extrinsics": []}

    async def query(
        self, module: str, storage_function: str, params: Optional[list] = None, block_hash: Optional[str] = None
    ) -> Any:
        return await self._call(
            "query", module=module, name=storage_function, params=params or [], block_hash=block_hash
        )

    async def map_has_entries(
        self, module: str, storage_function: str, params: list, block_hash: Optional[str] = None
    ) -> bool:
        return bool(await self.query_map(module, storage_function, params, block_hash))

    async def query_map(
        self, module: str, storage_function: str, params: Optional[list] = None, block_hash: Optional[str] = None
    ) -> list[tuple[Any, Any]]:
        rows = await self._call(
            "query_map", module=module, name=storage_function, params=params or [], block_hash=block_hash
        )
        return [(key, value) for key, value in rows]

    async def query_batch(
        self, module: str, storage_function: str, param_sets: list[list], block_hash: Optional[str] = None
    ) -> list[Any]:
        return await self._call(
            "query_batch", module=module, name=storage_function, param_sets=param_sets, block_hash=block_hash
        )

    async def runtime_call(self, api: str, method: str, params: Any, block_hash: Optional[str] = None) -> Any:
        return await self._call("runtime_call", api=api, method=method, params=params, block_hash=block_hash)

    async def constant(self, module: str, name: str) -> Any:
        raise ChainError(f"the embedded chain does not serve constant {module}.{name}")

    async def decode_scale(self, type_string: str, data: Any) -> Any:
        raise ChainError("the embedded chain does not decode SCALE: it has no runtime metadata")

    async def blocks(self, *, finalized: bool = False) -> AsyncIterator[dict]:
        """New heads, polled four times a block."""
        interval = await self.block_time() / 4
        seen = await self.block_number()
        while True:
            await asyncio.sleep(interval)
            head = await self.block_number()
            for number in range(seen + 1, head + 1):
                yield {"header": {"number": number, "parentHash": hash_of(number - 1)}}
            seen = max(seen, head)

    async def events(self, block_hash: Optional[str] = None) -> list[dict]:
        return []

    # -- calls and fees ------------------------------------------------------------------

    async def compose(self, call) -> ComposedCall:
        module, function, params = call
        return ComposedCall(module, function, dict(params))

    async def estimate_fee(self, call, keypair) -> Balance:
        return Balance.from_rao(0)

    async def estimate_weight(self, call, keypair) -> dict:
        return {"ref_time": 0, "proof_size": 0}

    async def account_next_index(self, address: str) -> int:
        return int(await self._call("account_next_index", address=address))

    # -- writes ------------------------------------------------------------------

    async def mev_next_key(self) -> Optional[bytes]:
        return None

    async def sign_extrinsic(self, call, keypair, *, nonce: int, period: int) -> tuple[bytes, str]:
        raise ChainError(_NO_SHIELD)

    async def find_extrinsic(self, extrinsic_hash: str, block_hash: str) -> Optional[ExtrinsicResult]:
        return None

    async def prepare(self, call, *, address: str, **kwargs: Any):
        raise ChainError("the embedded chain does not serve out-of-process signing")

    async def submit_signature(self, unsigned, signature, **kwargs: Any) -> ExtrinsicResult:
        raise ChainError("the embedded chain does not serve out-of-process signing")

    async def submit(
        self,
        call,
        keypair,
        *,
        nonce: Optional[int] = None,
        period: Optional[int] = None,
        wait_for_inclusion: bool = True,
        wait_for_finalization: bool = True,
    ) -> ExtrinsicResult:
        """Sign with ``keypair`` and apply at the head block; inclusion is immediate."""
        if not isinstance(call, ComposedCall):
            call = await self.compose(call)
        signer = keypair.ss58_address
        if nonce is None:
            nonce = await self.account_next_index(signer)
        info = await self._node_info()
        payload = signing_payload(info["chain_id"], signer, nonce, call.module, call.function, call.params)
        outcome = await self._call(
            "submit",
            signer=signer,
            nonce=nonce,
            call=[call.module, call.function, call.params],
            signature=bytes(keypair.sign(payload)).hex(),
        )
        if outcome["success"]:
            block = int(outcome["block"])
            events = [
                {
                    "event": {"module_id": "SubtensorModule", "event_id": name, "attributes": attributes},
                    "extrinsic_idx": 0,
                }
                for name, attributes in outcome.get("events", [])
            ]
            return ExtrinsicResult(
                success=True, message="Success", block_hash=hash_of(block), extrinsic_id=f"{block}-0000", events=events
            )
        return ExtrinsicResult(
            success=False, message=outcome["message"], error=ChainError(outcome["message"], outcome["name"])
        )

    async def submit_signed(self, extrinsic, keypair, **kwargs: Any) -> ExtrinsicResult:
        raise ChainError("the embedded chain does not accept pre-signed extrinsics")

    def multisig_account(self, signatories: list[str], threshold: int):
        raise ChainError("the embedded chain does not serve multisig")

    async def submit_multisig(self, call, keypair, multisig_account, **kwargs: Any) -> ExtrinsicResult:
        raise ChainError("the embedded chain does not serve multisig")


_NO_SHIELD = (
    "the embedded chain does not serve MEV-shielded submission (the SDK ships no ML-KEM "
    "decryption); submit the call directly with client.submit_call"
)
