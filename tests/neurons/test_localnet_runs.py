"""What `dagnet localnet` and the embedded chain leave on disk (issue 38): the default
folder keeps the last runs only, and a chain that stops cleanly removes its lock files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from chain.embedded.lock import hold_node_locks, release_node_locks
from neurons.localnet import prune_runs


def _runs(parent: Path, count: int) -> list[Path]:
    runs = [parent / f"localnet-20261128-10{minute:02d}00" for minute in range(count)]
    for run in runs:
        run.mkdir(parents=True)
        (run / "validator.log").write_text("x")
    return runs


def test_the_default_folder_keeps_the_newest_runs_and_any_whose_chain_runs(tmp_path: Path) -> None:
    runs = _runs(tmp_path, 6)
    (tmp_path / "notes").mkdir()  # not a run folder: never touched
    locks = hold_node_locks(runs[0] / "chain.sqlite")  # the oldest run's chain is still up
    try:
        removed = prune_runs(tmp_path, keep=2)
    finally:
        release_node_locks(runs[0] / "chain.sqlite", locks)
    assert removed == runs[1:4]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([runs[0].name, runs[4].name, runs[5].name, "notes"])
    assert prune_runs(tmp_path / "absent", keep=1) == []


def test_keep_runs_with_dir_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "neurons", "localnet", "--dir", str(tmp_path / "net"), "--keep-runs", "3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "error: --keep-runs prunes the default folder's runs: with --dir it would do nothing"
    ]


@pytest.mark.e2e
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_chain_stopped_cleanly_leaves_no_lock_files(tmp_path: Path, stop: signal.Signals) -> None:
    state = tmp_path / "chain.sqlite"
    node = subprocess.Popen(
        [sys.executable, "-m", "neurons", "chain", "start", "--state", str(state)],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},  # SIGABRT dumps every thread's stack
    )
    try:
        assert "listening on" in node.stderr.readline()
        assert {p.name for p in tmp_path.iterdir()} >= {"chain.sqlite.lock", "chain.sqlite.running"}
        node.send_signal(stop)
        try:
            code = node.wait(timeout=30)
        except subprocess.TimeoutExpired:
            # Once (SIGINT, a loaded suite) the node was still up 30 s later: say where it was.
            node.send_signal(signal.SIGABRT)
            node.wait(timeout=30)
            raise AssertionError(f"still running 30 s after {stop.name}:\n{node.stderr.read()[-6000:]}") from None
        assert code in (0, 130, -stop), node.stderr.read()[-2000:]
    finally:
        node.kill()
        node.wait()
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith((".lock", ".running"))]


STOPPED_AS_IT_ANNOUNCES = """
import os, signal, sys
from pathlib import Path
from chain.embedded.node import serve
stop = signal.Signals[sys.argv[2]]
serve(Path(sys.argv[1]), announce=lambda line: os.kill(os.getpid(), stop))
print("returned")
"""
"""A node whose stop signal arrives the moment it says it listens, before it serves."""


@pytest.mark.e2e
@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM"])
def test_a_stop_signal_as_the_node_announces_itself_still_stops_it_cleanly(tmp_path: Path, stop: str) -> None:
    """Under load a SIGINT once landed after "listening on" and before uvicorn took the
    signal over: asyncio's handler cancelled the starting task, and the node served on,
    idle, for good (its stacks: the loop in select). It now listens for the stop signals
    from before it announces itself."""
    state = tmp_path / "chain.sqlite"
    done = subprocess.run(
        [sys.executable, "-c", STOPPED_AS_IT_ANNOUNCES, str(state), stop], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout.strip()) == (0, "returned"), done.stderr[-3000:]
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith((".lock", ".running"))]
