"""A miner that cannot take part says so: at start, and on /health with 503 and the reason."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from chain.base import Hyperparameters
from miner.metagraph import FileMetagraph, StaticMetagraph, snapshot_to_dict
from miner.readiness import readiness
from neurons.follow import MetagraphFollower
from protocol.metagraph import Axon
from support.keys import MetagraphBuilder, dev_keypair
from support.miner import running_miner

ROOT = Path(__file__).resolve().parents[2]
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


def test_a_metagraph_file_of_another_subnet_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "mg.json"
    path.write_text(json.dumps(snapshot_to_dict(_snapshot(with_bob=True))))
    assert FileMetagraph(path, netuid=7, check_interval_s=0.0).snapshot().netuid == 7
    other = FileMetagraph(path, netuid=1, check_interval_s=0.0)
    assert other.snapshot() is None
    assert "is of netuid 7, but this miner serves netuid 1" in other.problem()
    assert not readiness(other.snapshot(), BOB, other.problem()).ready


class _ChainOf:
    """A chain answering with one fixed metagraph, whatever netuid it was opened for."""

    def __init__(self, netuid: int, snapshot) -> None:
        self.netuid, self.hotkey, self._snapshot = netuid, BOB, snapshot

    async def block(self) -> int:
        return self._snapshot.block

    async def metagraph(self, block=None):
        return self._snapshot

    async def hyperparameters(self) -> Hyperparameters:
        return Hyperparameters(
            tempo=10,
            weights_rate_limit=1,
            immunity_period=0,
            max_weight_limit=1.0,
            min_allowed_weights=0,
            commit_reveal_enabled=False,
        )


async def test_a_followed_chain_whose_metagraph_is_of_another_subnet_is_refused(caplog) -> None:
    target = StaticMetagraph(None)
    follower = MetagraphFollower(lambda: None, target, axon=None)
    chain = _ChainOf(1, _snapshot(with_bob=True))
    for _ in range(3):
        await follower.step(chain)
        follower._synced_block = None  # ask again at once
    assert target.snapshot() is None and "is of netuid 7, but this miner serves netuid 1" in target.problem()
    assert len([r for r in caplog.records if "cannot follow the chain" in r.getMessage()]) == 1
    await follower.step(_ChainOf(7, _snapshot(with_bob=True)))
    assert target.snapshot().netuid == 7 and target.problem() is None


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


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("metagraph", "needle"),
    [("bad.json", "not valid"), ("netuid7.json", "is of netuid 7, but this miner serves netuid 1")],
)
def test_the_miner_says_it_is_not_ready_at_start(tmp_path: Path, metagraph: str, needle: str) -> None:
    """(A miner given no metagraph to follow does not start at all: tests/neurons/test_network_defaults.py.)"""
    (tmp_path / "bad.json").write_text("{broken")
    (tmp_path / "netuid7.json").write_text(json.dumps(snapshot_to_dict(_snapshot(with_bob=True))))
    args = [
        "--dev-key",
        "//Bob",
        "--port",
        "0",
        "--log-level",
        "warning",
        "--metagraph-file",
        str(tmp_path / metagraph),
    ]
    proc = subprocess.Popen([sys.executable, "-m", "neurons.miner", *args], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        lines = [proc.stderr.readline() for _ in range(2)]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert "listening on" in lines[0]
    assert "not ready" in lines[1] and needle in lines[1], lines
