"""The miner process entry point and the metagraph file it reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from miner.metagraph import FileMetagraph, snapshot_from_json, snapshot_to_dict
from neurons.miner import MinerProcessConfig
from protocol.metagraph import Axon
from support.keys import MetagraphBuilder, dev_keypair, signed_headers

ROOT = Path(__file__).resolve().parents[2]


def _write_snapshot(path: Path, block: int = 100) -> None:
    snapshot = (
        MetagraphBuilder(netuid=3)
        .validator(dev_keypair("Alice"), stake=2_000.0)
        .miner(dev_keypair("Bob"), axon=Axon("127.0.0.1", 8091))
        .build(block=block)
    )
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(snapshot_to_dict(snapshot)))
    os.replace(tmp, path)


def test_snapshot_json_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "mg.json"
    _write_snapshot(path)
    snapshot = snapshot_from_json(path.read_bytes())
    assert snapshot.netuid == 3
    assert snapshot.by_hotkey(dev_keypair("Alice").ss58_address).validator_permit
    assert snapshot.by_uid(1).axon == Axon("127.0.0.1", 8091)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("[]", "must be an object"),
        ('{"block": 1}', "'netuid'"),
        ('{"netuid": 1, "neurons": [{"uid": 0}]}', "neurons[0] is missing 'hotkey'"),
        ('{"netuid": 1, "neurons": [{"uid": "x", "hotkey": "h"}]}', "neurons[0] is invalid"),
    ],
)
def test_bad_snapshot_json_names_the_problem(doc: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        snapshot_from_json(doc)


def test_file_metagraph_follows_the_file(tmp_path: Path) -> None:
    path = tmp_path / "mg.json"
    source = FileMetagraph(path, check_interval_s=0.0)
    assert source.snapshot() is None  # no file yet: not synced
    _write_snapshot(path, block=100)
    assert source.snapshot().block == 100
    path.write_text("{broken")
    assert source.snapshot().block == 100  # a bad rewrite keeps the last good snapshot
    _write_snapshot(path, block=200)
    os.utime(path, ns=(1, 1))  # make sure the mtime differs from the broken write's
    assert source.snapshot().block == 200


def test_process_config_needs_exactly_one_key_source() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        MinerProcessConfig()
    with pytest.raises(ValueError, match="exactly one"):
        MinerProcessConfig(dev_key="//Bob", wallet_name="w")
    assert MinerProcessConfig(dev_key="//Bob").hotkey().ss58_address == dev_keypair("Bob").ss58_address


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "neurons.miner", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


@pytest.mark.e2e
def test_help_works() -> None:
    result = _run("--help")
    assert result.returncode == 0
    assert "--metagraph-file" in result.stdout and "--dev-key" in result.stdout


@pytest.mark.e2e
def test_bad_settings_exit_with_a_message() -> None:
    result = _run("--dev-key", "//Bob", "--workers", "0")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "workers" in result.stderr


@pytest.mark.e2e
def test_unknown_strategy_exits_with_a_message() -> None:
    result = _run("--dev-key", "//Bob", "--planner", "psychic", "--port", "0")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "psychic" in result.stderr


@pytest.mark.e2e
def test_a_metagraph_file_that_is_not_there_exits_with_a_message(tmp_path: Path) -> None:
    """Not a miner that says "listening" and answers 503 for ever."""
    result = _run("--dev-key", "//Bob", "--port", "0", "--metagraph-file", str(tmp_path / "nowhere.json"))
    assert result.returncode == 2 and "listening" not in result.stderr
    assert result.stderr.count("\n") == 1 and "nowhere.json: no such file" in result.stderr, result.stderr


@pytest.mark.e2e
@pytest.mark.parametrize("workers", [1, 2])
async def test_served_process_refuses_replays_across_workers(tmp_path: Path, workers: int) -> None:
    metagraph = tmp_path / "mg.json"
    _write_snapshot(metagraph)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "neurons.miner",
            "--dev-key",
            "//Bob",
            "--metagraph-file",
            str(metagraph),
            "--netuid",
            "3",
            "--port",
            "0",
            "--workers",
            str(workers),
            "--set",
            f"nonce_db={tmp_path / 'nonces.db'}",
            "--set",
            'serve.sn1=["echo"]',
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stderr.readline()
        assert "listening on" in line, line
        url = line.split("listening on ")[1].split()[0]
        async with httpx.AsyncClient(timeout=60) as client:
            health = await client.get(url + "/health")  # waits in the backlog until a worker serves
        body = json.dumps(
            {"task_id": "t", "node_id": "n", "subnet": "sn1", "action": "echo", "params": {"text": "hi"}}
        ).encode()
        headers = signed_headers(dev_keypair("Alice"), dev_keypair("Bob"), "/NodeSynapse", body)
        # a new connection each time, so the two requests may land on different workers
        async with httpx.AsyncClient(timeout=60) as client:
            first = await client.post(url + "/NodeSynapse", content=body, headers=headers)
        async with httpx.AsyncClient(timeout=60) as client:
            replay = await client.post(url + "/NodeSynapse", content=body, headers=headers)
        assert health.json()["uid"] == 1
        assert first.status_code == 200, first.text
        assert replay.status_code == 401 and replay.json()["reason"] == "replayed"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_hotkey_comes_from_a_wallet(tmp_path: Path) -> None:
    import bittensor as bt

    wallet = bt.Wallet("owner", "hot", str(tmp_path)).create_new_hotkey(suppress=True)
    config = MinerProcessConfig(wallet_name="owner", wallet_hotkey="hot", wallet_path=str(tmp_path))
    assert config.hotkey().ss58_address == wallet.hotkey.ss58_address
