"""Replay protection shared by worker processes through SQLite."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest
from bittensor.http_auth import InMemoryNonceStore

from miner.nonces import SqliteNonceStore, nonce_store_for
from miner.settings import MinerSettings


def test_a_pair_is_accepted_once(tmp_path: Path) -> None:
    store = SqliteNonceStore(tmp_path / "n.db")
    now = time.time_ns()
    assert store.check_and_store("alice", now)
    assert not store.check_and_store("alice", now)
    assert store.check_and_store("bob", now)  # same nonce, other hotkey
    assert store.check_and_store("alice", now + 1)


def test_the_file_outlives_the_store(tmp_path: Path) -> None:
    now = time.time_ns()
    first = SqliteNonceStore(tmp_path / "n.db")
    assert first.check_and_store("alice", now)
    first.close()
    assert not SqliteNonceStore(tmp_path / "n.db").check_and_store("alice", now)


def test_purge_drops_only_expired_nonces(tmp_path: Path) -> None:
    store = SqliteNonceStore(tmp_path / "n.db", retention=60.0, purge_batch=7)
    now = time.time_ns()
    old = [now - 120 * 10**9 + i for i in range(20)]
    for nonce in old:
        store.check_and_store("alice", nonce)
    store.check_and_store("alice", now)
    assert store.purge() == 20
    assert store.check_and_store("alice", old[0])  # forgotten: verify() rejects it as stale anyway
    assert not store.check_and_store("alice", now)  # still remembered


def test_purge_runs_by_itself(tmp_path: Path) -> None:
    store = SqliteNonceStore(tmp_path / "n.db", retention=60.0, purge_every=10)
    expired = time.time_ns() - 120 * 10**9
    for i in range(10):  # the 10th insert triggers a purge of all ten
        store.check_and_store("alice", expired + i)
    assert store.check_and_store("alice", expired)


def _claim(path: str, pairs: list[tuple[str, int]], start, results) -> None:
    store = SqliteNonceStore(Path(path))
    start.wait()
    try:
        results.put([pair for pair in pairs if store.check_and_store(*pair)])
    except Exception as exc:  # reported, so the parent fails at once instead of waiting
        results.put(f"{type(exc).__name__}: {exc}")


@pytest.mark.e2e
def test_two_processes_never_both_accept_a_nonce(tmp_path: Path) -> None:
    now = time.time_ns()
    pairs = [(f"hotkey-{i % 5}", now + i) for i in range(400)]
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Barrier(2), ctx.Queue()
    workers = [
        ctx.Process(target=_claim, args=(str(tmp_path / "n.db"), order, start, results))
        for order in (pairs, pairs[::-1])
    ]
    for worker in workers:
        worker.start()
    claimed = [results.get(timeout=60) for _ in workers]
    assert all(isinstance(c, list) for c in claimed), claimed
    for worker in workers:
        worker.join(timeout=60)
    first, second = (set(map(tuple, c)) for c in claimed)
    assert not first & second  # a replay is refused whichever worker sees it
    assert first | second == set(pairs)  # and every fresh nonce is accepted once


def test_store_choice_follows_the_worker_count(tmp_path: Path) -> None:
    single = nonce_store_for(MinerSettings())
    shared = nonce_store_for(MinerSettings(workers=4, nonce_db=tmp_path / "x.db"))
    assert isinstance(single, InMemoryNonceStore)
    assert isinstance(shared, SqliteNonceStore) and shared.path == tmp_path / "x.db"
    assert shared.retention >= MinerSettings().auth.retention_s
