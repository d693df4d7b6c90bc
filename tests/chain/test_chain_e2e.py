"""Done-when: an embedded chain, a validator and three miners as separate processes.

Everything goes through the `dagnet` commands and the miner process; only the
validator's weights are set by a small script (the validator loop decides its
weights from scores, which is not what this test is about).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import bittensor as bt
import httpx
import pytest

from support.chain import wait_listening
from support.keys import fresh_keypair, signed_headers

pytestmark = pytest.mark.e2e


TEMPO, RATE_LIMIT, BLOCK_TIME = 10, 2, 0.2
OWNER_CUT = 0.18


def dagnet(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "neurons", *args], capture_output=True, text=True, timeout=120)
    if check and result.returncode != 0:
        raise AssertionError(f"dagnet {' '.join(args)} exited {result.returncode}: {result.stderr}")
    return result


@contextmanager
def background(*args: str) -> Iterator[subprocess.Popen]:
    process = subprocess.Popen([sys.executable, "-m", "neurons", *args], stderr=subprocess.PIPE, text=True)
    try:
        yield process
    finally:
        process.terminate()
        process.wait(timeout=15)


def chain_node(state: Path) -> contextmanager:
    return background(
        "chain",
        "start",
        "--state",
        str(state),
        "--block-time",
        str(BLOCK_TIME),
        "--tempo",
        str(TEMPO),
        "--weights-rate-limit",
        str(RATE_LIMIT),
    )


def status(network: str) -> dict:
    return json.loads(dagnet("chain", "status", "--network", network, "--json").stdout)


def wait_status(network: str, ready, timeout_s: float = 90.0) -> dict:
    """Poll ``dagnet chain status`` until ``ready(status)``; blocks come from the node's clock."""
    deadline = time.monotonic() + timeout_s
    while True:
        current = status(network)
        if ready(current):
            return current
        if time.monotonic() > deadline:
            raise TimeoutError(f"chain never got there: {json.dumps(current)[:2000]}")


def miner_url(process: subprocess.Popen) -> str:
    return wait_listening(process).split("listening on ")[1].split()[0]


def test_validator_and_three_miners_on_the_embedded_chain(tmp_path):
    state, wallets = tmp_path / "chain.sqlite", str(tmp_path / "wallets")
    network = f"embedded:{state}"
    names = ["validator", "miner1", "miner2", "miner3"]
    for name in names:
        dagnet("wallet", "create-dev", name, "--wallet.path", wallets)
    keys = {n: bt.Wallet(n, "default", path=wallets).hotkey for n in names}
    with chain_node(state) as node:
        wait_listening(node)
        common = ("--network", network, "--wallet.path", wallets)
        for name in names:
            assert json.loads(dagnet("subnet", "register", "--wallet.name", name, *common).stdout)[
                "uid"
            ] == names.index(name)
        dagnet("subnet", "stake", "1000", "--wallet.name", "validator", *common)
        miners = [
            background(
                "miner",
                "--network",
                network,
                "--wallet-name",
                name,
                "--wallet-path",
                wallets,
                "--port",
                "0",
                "--set",
                "min_stake=100",
            )
            for name in names[1:]
        ]
        with miners[0] as m1, miners[1] as m2, miners[2] as m3:
            urls = [miner_url(m) for m in (m1, m2, m3)]
            wait_status(
                network, lambda s: all(n["axon"] for n in s["neurons"][1:]) and s["neurons"][0]["validator_permit"]
            )
            weights_block = _set_weights(network, wallets, {1: 0.6, 2: 0.3, 3: 0.1})
            final = wait_status(network, lambda s: s["block"] >= weights_block + 2 * (TEMPO + 1))
            _blacklists(urls, keys)
    neurons = final["neurons"]
    assert [n["axon"] for n in neurons[1:]] == urls
    incentive = [n["incentive"] for n in neurons[1:]]
    assert incentive[0] > incentive[1] > incentive[2] > 0
    assert incentive == pytest.approx([0.6, 0.3, 0.1], abs=1e-3)
    assert neurons[0]["dividends"] == pytest.approx(1.0, abs=1e-3)
    # One epoch's pot is tempo+1 blocks of 1 α; the owner keeps 18%, the neurons get the rest.
    paid = sum(n["emission"] for n in neurons)
    assert paid == pytest.approx((TEMPO + 1) * (1 - OWNER_CUT), abs=1e-6)
    assert neurons[0]["emission"] == pytest.approx(paid / 2, abs=1e-6)


def _set_weights(network: str, wallets: str, weights: dict[int, float]) -> int:
    script = (
        "import asyncio, json, sys; import bittensor as bt; from chain.network import parse_network; "
        "from chain.sdk import SdkChain; "
        "c = SdkChain.open(parse_network(sys.argv[1]), bt.Wallet('validator', 'default', path=sys.argv[2]), 1); "
        "w = json.loads(sys.argv[3]); r = asyncio.run(c.set_weights([int(k) for k in w], list(w.values()), 0)); "
        "print(json.dumps({'success': r.success, 'message': r.message, 'block': r.block}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, network, wallets, json.dumps(weights)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result = json.loads(out.stdout)
    assert result["success"], result["message"]
    return result["block"]


def _blacklists(urls: list[str], keys: dict) -> None:
    body = b"{}"
    for url, name in zip(urls, ["miner1", "miner2", "miner3"]):
        admitted = httpx.post(
            url + "/NodeSynapse",
            content=body,
            headers=signed_headers(keys["validator"], keys[name], "/NodeSynapse", body),
        )
        assert admitted.status_code not in (401, 403, 503), admitted.text
        stranger = httpx.post(
            url + "/NodeSynapse",
            content=body,
            headers=signed_headers(fresh_keypair(), keys[name], "/NodeSynapse", body),
        )
        assert stranger.status_code == 403 and stranger.json()["reason"] == "unregistered"
        other = "miner2" if name != "miner2" else "miner1"
        peer = httpx.post(
            url + "/NodeSynapse", content=body, headers=signed_headers(keys[other], keys[name], "/NodeSynapse", body)
        )
        assert peer.status_code == 403 and peer.json()["reason"] in ("no_validator_permit", "stake_below_minimum")
