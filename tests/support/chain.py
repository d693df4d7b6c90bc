"""An embedded chain node in its own process, for tests that need a chain."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

from bittensor.sp_core import Keypair

from chain.base import blocks_until_epoch
from chain.network import Network
from chain.sdk import SdkChain

FAST = {"tempo": 5, "weights_rate_limit": 3, "immunity_period": 50}


def node_process(state: Path, block_time: float = 0.1, **genesis: int) -> subprocess.Popen:
    code = (
        "import sys, json; from chain.embedded.node import serve; from chain.embedded.genesis import Genesis; "
        "serve(sys.argv[1], block_time=float(sys.argv[2]), genesis=Genesis(**json.loads(sys.argv[3])), "
        "announce=lambda l: print(l, file=sys.stderr, flush=True))"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, str(state), str(block_time), json.dumps({**FAST, **genesis})],
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_listening(process: subprocess.Popen, timeout_s: float = 120.0) -> str:
    """The process's "listening on" line (a node or a miner), once it is listening."""
    deadline = time.monotonic() + timeout_s
    seen = []
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        seen.append(line)
        if "listening on" in line:
            return line
        if process.poll() is not None:
            raise RuntimeError("process exited: " + "".join(seen) + process.stderr.read())
    raise TimeoutError("process did not start listening")


@contextmanager
def running_node(state: Path, block_time: float = 0.1, **genesis: int) -> Iterator[subprocess.Popen]:
    process = node_process(state, block_time, **genesis)
    try:
        wait_listening(process)
        yield process
    finally:
        process.terminate()
        process.wait(timeout=10)


def dev_wallet(hotkey_uri: str, coldkey_uri: str = "//Alice") -> SimpleNamespace:
    """A wallet-shaped object of dev keys (what the SDK reads from a ``bt.Wallet``)."""
    cold = Keypair.create_from_uri(coldkey_uri)
    return SimpleNamespace(coldkey=cold, coldkeypub=cold, hotkey=Keypair.create_from_uri(hotkey_uri))


def without_backoff(monkeypatch) -> None:
    """Every :class:`SdkChain` made in this test retries as many times as the product
    makes it, at once: the backoff between attempts (0.5 s doubling, about 8 s in all)
    is waiting, not behaviour, for a test of what a command says once the retries are
    spent. Only for chains a command builds itself (``SdkChain.open`` with the default)."""
    monkeypatch.setitem(SdkChain.__init__.__kwdefaults__, "backoff_s", 0.0)


def chain_for(state: Path, hotkey_uri: str, netuid: int = 1, *, coldkey_uri: str = "//Alice", **kwargs) -> SdkChain:
    return SdkChain.open(Network("embedded", state), dev_wallet(hotkey_uri, coldkey_uri), netuid, **kwargs)


async def wait_for_next_epoch(chain: SdkChain) -> int:
    """Wait until an epoch has run after everything this chain did before the call.

    The next epoch is worked out from one head read: the head and the schedule read
    at two moments can be blocks apart and name a block before the epoch. An epoch runs
    in the same write as its block, before any call applied at that block, so when the
    head is itself an epoch block the one that counts is the next.
    """
    block = await chain.block()
    tempo = (await chain.hyperparameters()).tempo
    return await wait_for_block(chain, block + (blocks_until_epoch(block, chain.netuid, tempo) or tempo + 1))


async def wait_for_block(chain: SdkChain, block: int, timeout_s: float = 30.0) -> int:
    """Poll the chain's head until it reaches ``block`` (blocks come from the node's clock)."""
    import asyncio

    deadline = time.monotonic() + timeout_s
    while (head := await chain.block()) < block:
        if time.monotonic() > deadline:
            raise TimeoutError(f"chain stuck at block {head}, waiting for {block}")
        await asyncio.sleep(0.02)
    return head
