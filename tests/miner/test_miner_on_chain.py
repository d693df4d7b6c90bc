"""The miner on the embedded chain: it syncs, serves its axon, and rides out a chain outage."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import httpx
import pytest

from support.chain import chain_for, running_node, wait_for_next_epoch
from support.keys import dev_keypair, signed_headers

pytestmark = pytest.mark.e2e


class Lines:
    """A process's stderr, drained on a thread so the process never blocks on a full pipe."""

    def __init__(self, process: subprocess.Popen) -> None:
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [self._lines.put(line) for line in process.stderr], daemon=True).start()

    def wait_for(self, needle: str, timeout_s: float = 120.0) -> str:
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                break
            if needle in line:
                return line
        raise TimeoutError(f"never saw {needle!r}")


def _health_until(url: str, ready: Callable[[dict], bool], timeout_s: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        health = httpx.get(url + "/health").json()
        if ready(health):
            return health
        if time.monotonic() > deadline:
            raise TimeoutError(f"miner health never got there: {health}")
        time.sleep(0.05)  # polling an observable condition, not waiting out a race


class ChainMiner:
    """``dagnet miner`` on the embedded chain at ``state``, as a process; ``url`` once it listens."""

    def __init__(self, state, dev_key: str, *args: str) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "neurons",
                "miner",
                "--network",
                f"embedded:{state}",
                "--dev-key",
                dev_key,
                "--port",
                "0",
                *args,
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines = Lines(self.process)
        try:
            self.url = self.lines.wait_for("listening on").split("listening on ")[1].split()[0]
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=15)


def _ask(url: str, signer) -> httpx.Response:
    body = b"{}"
    return httpx.post(
        url + "/NodeSynapse", content=body, headers=signed_headers(signer, dev_keypair("M1"), "/NodeSynapse", body)
    )


async def test_miner_syncs_serves_its_axon_and_survives_an_outage(tmp_path):
    state = tmp_path / "chain.sqlite"
    with running_node(state, tempo=10):
        validator = chain_for(state, "//V")
        await validator.register()
        await validator.stake(100)
        await chain_for(state, "//M1").register()
        miner = ChainMiner(state, "//M1", "--sync-every", "2")
        lines, url = miner.lines, miner.url
        try:
            lines.wait_for("axon served")
            snapshot = await validator.metagraph()
            assert snapshot.by_hotkey(dev_keypair("M1").ss58_address).axon.url == url
            await wait_for_next_epoch(validator)
            permit_block = await validator.block()
            before = _health_until(url, lambda h: h["registered"] and h["metagraph_block"] >= permit_block)
            assert _ask(url, dev_keypair("V")).status_code == 422  # admitted: the empty body fails validation
        except BaseException:
            miner.stop()
            raise
    try:
        warning = lines.wait_for("cannot reach the chain")  # one warning, not one per poll
        assert "serving on the metagraph of block" in warning
        down_until = time.monotonic() + 4.0  # the chain stays down across several of the miner's polls
        while time.monotonic() < down_until:
            during = httpx.get(url + "/health").json()
            assert during["synced"] and during["metagraph_block"] >= before["metagraph_block"]
            assert _ask(url, dev_keypair("V")).status_code == 422  # still serving on its last metagraph
            assert _ask(url, dev_keypair("Stranger")).status_code == 403
        with running_node(state, tempo=10):
            _health_until(url, lambda h: h["metagraph_block"] > during["metagraph_block"])
    finally:
        miner.stop()


async def test_an_unregistered_miner_says_so(tmp_path):
    state = tmp_path / "chain.sqlite"
    with running_node(state):
        miner = ChainMiner(state, "//Nobody")
        try:
            assert "is not registered on netuid 1" in miner.lines.wait_for("not registered")
            health = _health_until(miner.url, lambda h: h["synced"])
            assert health["registered"] is False and health["uid"] is None
        finally:
            miner.stop()


async def test_a_miner_for_a_subnet_the_chain_does_not_have_is_not_ready(tmp_path):
    state = tmp_path / "chain.sqlite"
    with running_node(state):
        await chain_for(state, "//M1").register()
        miner = ChainMiner(state, "//M1", "--netuid", "2")
        try:
            assert "subnet 2 does not exist" in miner.lines.wait_for("cannot follow the chain")
            health = _health_until(miner.url, lambda h: h["reason"] != "no metagraph yet")
            assert not health["synced"] and "subnet 2 does not exist" in health["reason"]
        finally:
            miner.stop()
