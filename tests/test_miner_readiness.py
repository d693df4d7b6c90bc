"""A miner that cannot take part says so: at start, and on /health with 503 and the reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from miner.metagraph import FileMetagraph, StaticMetagraph
from miner.readiness import readiness
from protocol.metagraph import Axon
from support.keys import MetagraphBuilder, dev_keypair
from support.miner import running_miner

ROOT = Path(__file__).resolve().parents[1]
BOB = dev_keypair("Bob").ss58_address


def _snapshot(*, with_bob: bool):
    builder = MetagraphBuilder(netuid=7).validator(dev_keypair("Alice"), stake=1_000.0)
    if with_bob:
        builder = builder.miner(dev_keypair("Bob"), axon=Axon("127.0.0.1", 8091))
    return builder.build()


def test_ready_once_registered() -> None:
    state = readiness(_snapshot(with_bob=True), BOB)
    assert state.ready and state.uid == 1


def test_not_ready_without_a_snapshot_says_why() -> None:
    assert readiness(None, BOB, "metagraph file x: no such file").reason == "metagraph file x: no such file"
    assert not readiness(None, BOB).ready


def test_not_ready_when_the_hotkey_is_not_registered() -> None:
    state = readiness(_snapshot(with_bob=False), BOB)
    assert not state.ready and state.uid is None
    assert state.reason == f"hotkey {BOB} is not registered on netuid 7"


def test_metagraph_sources_say_why_they_have_no_snapshot(tmp_path: Path) -> None:
    assert StaticMetagraph(None).problem() == "no metagraph yet"
    assert StaticMetagraph(_snapshot(with_bob=True)).problem() is None
    missing = FileMetagraph(tmp_path / "mg.json", check_interval_s=0.0)
    assert "mg.json: no such file" in missing.problem()
    (tmp_path / "mg.json").write_text("{broken")
    assert missing.snapshot() is None and "not valid" in missing.problem()


@pytest.mark.parametrize(
    ("snapshot", "reason"),
    [(None, "no metagraph yet"), (_snapshot(with_bob=False), "is not registered on netuid 7")],
    ids=["no metagraph", "unregistered"],
)
async def test_health_is_503_with_the_reason_while_not_ready(snapshot, reason: str) -> None:
    async with running_miner(snapshot=snapshot) as miner:
        response = await miner.get("/health")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "not_ready" and reason in body["reason"]
    assert body["hotkey"] == BOB


async def test_health_is_200_when_ready() -> None:
    async with running_miner() as miner:
        response = await miner.get("/health")
    assert response.status_code == 200
    assert response.json()["status"] == "ok" and response.json()["reason"] is None


@pytest.mark.parametrize(
    ("metagraph", "needle"),
    [(None, "no metagraph yet"), ("missing.json", "missing.json: no such file"), ("bad.json", "not valid")],
)
def test_the_miner_says_it_is_not_ready_at_start(tmp_path: Path, metagraph: str | None, needle: str) -> None:
    args = ["--dev-key", "//Bob", "--port", "0", "--log-level", "warning"]
    if metagraph is not None:
        (tmp_path / "bad.json").write_text("{broken")
        args += ["--metagraph-file", str(tmp_path / metagraph)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "neurons.miner", *args], cwd=ROOT, stderr=subprocess.PIPE, text=True
    )
    try:
        lines = [proc.stderr.readline() for _ in range(2)]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert "listening on" in lines[0]
    assert "not ready" in lines[1] and needle in lines[1], lines
