"""What the embedded chain's node and its clients agree on: block hashes and the signed payload."""

from __future__ import annotations

import json
from typing import Any

RPC_PATH = "/rpc"
KEEP_ALIVE_S = 30.0
"""How long the node keeps an idle client connection open; clients drop theirs sooner."""


def block_hash(block: int) -> str:
    """The embedded chain's hash of a block: its number, so a pinned read knows its block."""
    return f"0x{block:064x}"


def block_from_hash(value: str | None) -> int | None:
    return None if value is None else int(value, 16)


def signing_payload(
    chain_id: str, signer: str, nonce: int, module: str, function: str, params: dict[str, Any]
) -> bytes:
    """The bytes a signer signs: the call, its account nonce and the chain it is meant for."""
    body = {"chain": chain_id, "signer": signer, "nonce": nonce, "call": [module, function, params]}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
