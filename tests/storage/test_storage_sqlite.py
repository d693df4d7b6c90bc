"""Several processes opening one fresh SQLite file at the same moment all succeed."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from storage import open_shared

_SCHEMA = ("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY)",)


def _open_and_write(path: str, key: int, start) -> None:
    start.wait()
    conn = open_shared(Path(path), _SCHEMA)
    conn.execute("INSERT INTO t (k) VALUES (?)", (key,))
    conn.close()


@pytest.mark.e2e
def test_processes_starting_together_all_open_a_fresh_file(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    processes_per_round = 4
    for round_ in range(50):
        path = tmp_path / f"shared-{round_}.db"
        start = ctx.Barrier(processes_per_round)
        workers = [
            ctx.Process(target=_open_and_write, args=(str(path), key, start)) for key in range(processes_per_round)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=30)
        assert [w.exitcode for w in workers] == [0] * processes_per_round, f"round {round_}"
        conn = open_shared(path)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert sorted(k for (k,) in conn.execute("SELECT k FROM t")) == list(range(processes_per_round))
        conn.close()


def test_a_file_that_is_not_sqlite_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"not a database" * 100)
    import sqlite3

    import pytest

    with pytest.raises(sqlite3.DatabaseError):
        open_shared(path, _SCHEMA)
