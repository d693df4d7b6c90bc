"""`dagnet bench chain`: the epoch's cost and a metagraph read's cost on the embedded chain.

- **Epoch.** :func:`chain.epoch.run_epoch` on a full subnet: 256 uids, 64 of them
  validators with stake and dense weights over every uid, bonds carried from the
  previous epoch. Median of ``repeats`` runs. Target: 50 ms.
- **Metagraph read.** A node (``dagnet chain start`` in a child process) on a state
  file with 256 registered uids, ss58 hotkeys and an axon each (as on a live
  subnet); each read is ``SdkChain.metagraph()``: the head (from the state file),
  then ``bt.Client.subnets.metagraph`` pinned to it (one RPC, the SDK's decoding).
  Median of ``reads``. Target: 10 ms.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from bittensor.sp_core import Keypair
from rich.console import Console

from chain.embedded.state import ChainState
from chain.epoch import EpochInputs, run_epoch
from chain.network import Network
from chain.sdk import SdkChain

EPOCH_TARGET_MS = 50.0
READ_TARGET_MS = 10.0


def epoch_inputs(uids: int = 256, validators: int = 64, seed: int = 0) -> EpochInputs:
    rng = np.random.default_rng(seed)
    stake = np.zeros(uids)
    stake[:validators] = rng.uniform(100, 10_000, validators)
    weights = np.zeros((uids, uids))
    weights[:validators] = rng.uniform(0, 1, (validators, uids))
    bonds = np.zeros((uids, uids))
    bonds[:validators] = rng.uniform(0, 1, (validators, uids))
    return EpochInputs(
        block=1_000,
        stake=stake,
        weights=weights,
        bonds=bonds,
        last_update=np.full(uids, 990.0),
        registered_at=np.zeros(uids),
        validator_permit=stake > 0,
        last_epoch_block=900,
    )


def time_epoch(repeats: int) -> list[float]:
    inputs = epoch_inputs()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        run_epoch(inputs)
        samples.append(time.perf_counter() - start)
    return samples


def populate(state_path: Path, uids: int) -> None:
    """``uids`` neurons as a live subnet has them: ss58 hotkeys, each serving an axon.

    Applied to the state directly (the node is not running yet)."""
    state = ChainState(state_path)
    netuid = state.genesis.netuid
    try:
        for i in range(uids):
            hotkey = Keypair.create_from_uri(f"//bench-hot-{i}").ss58_address
            state.apply(
                Keypair.create_from_uri(f"//bench-cold-{i}").ss58_address,
                0,
                "burned_register",
                {"netuid": netuid, "hotkey": hotkey},
            )
            axon = {
                "ip": int(ipaddress.IPv4Address("10.0.0.0")) + i,
                "port": 8091,
                "ip_type": 4,
                "version": 1,
                "protocol": 4,
            }
            state.apply(hotkey, 0, "serve_axon", {"netuid": netuid, **axon})
    finally:
        state.close()


async def time_reads(state_path: Path, reads: int) -> tuple[list[float], list[float]]:
    """Wall and client-CPU seconds per read (the node's own work is in the wall time only)."""
    chain = SdkChain.open(Network("embedded", state_path), None, 1)
    wall, cpu = [], []
    try:
        await chain.metagraph()  # connect, warm up
        for _ in range(reads):
            start, start_cpu = time.perf_counter(), time.process_time()
            await chain.metagraph()
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
    finally:
        await chain.close()
    return wall, cpu


def run_chain_bench(repeats: int = 21, reads: int = 50, uids: int = 256) -> dict[str, Any]:
    epoch = time_epoch(repeats)
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "chain.sqlite"
        populate(state, uids)
        node = subprocess.Popen(
            [sys.executable, "-m", "neurons", "chain", "start", "--state", str(state), "--block-time", "3600"],
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            _wait_listening(node)
            read, read_cpu = asyncio.run(time_reads(state, reads))
        finally:
            node.terminate()
            node.wait(timeout=10)
    epoch_ms, read_ms = statistics.median(epoch) * 1000, statistics.median(read) * 1000
    return {
        "epoch": {
            "uids": 256,
            "validators": 64,
            "repeats": repeats,
            "median_ms": epoch_ms,
            "target_ms": EPOCH_TARGET_MS,
            "meets_target": epoch_ms <= EPOCH_TARGET_MS,
        },
        "metagraph_read": {
            "uids": uids,
            "reads": reads,
            "median_ms": read_ms,
            "client_cpu_median_ms": statistics.median(read_cpu) * 1000,
            "target_ms": READ_TARGET_MS,
            "meets_target": read_ms <= READ_TARGET_MS,
        },
        "load_average_1m": os.getloadavg()[0],
        "cpus": os.cpu_count(),
    }


def _wait_listening(node: subprocess.Popen) -> None:
    assert node.stderr is not None  # the node is started with stderr=PIPE
    for line in node.stderr:
        if "listening on" in line:
            return
    raise RuntimeError(f"the chain node exited with {node.wait()}")


def render_chain_bench(result: dict[str, Any], console: Console) -> None:
    epoch, read = result["epoch"], result["metagraph_read"]
    verdict = lambda ok: "[green]meets target[/green]" if ok else "[red]misses target[/red]"  # noqa: E731
    console.print(
        f"epoch, {epoch['uids']} uids × {epoch['validators']} validators: {epoch['median_ms']:.2f} ms "
        f"(median of {epoch['repeats']}; target ≤ {epoch['target_ms']:.0f} ms) {verdict(epoch['meets_target'])}"
    )
    console.print(
        f"metagraph read on the embedded chain, {read['uids']} uids: {read['median_ms']:.2f} ms "
        f"(median of {read['reads']}; target ≤ {read['target_ms']:.0f} ms) {verdict(read['meets_target'])}; "
        f"client CPU {read['client_cpu_median_ms']:.2f} ms per read"
    )
    console.print(f"load average {result['load_average_1m']:.1f} on {result['cpus']} CPUs", highlight=False)
