"""The chain commands' edges: bad input is one line on stderr and exit 2; bench chain reports its figures."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


def dagnet(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "neurons", *args], capture_output=True, text=True, timeout=180, env=env
    )


def _one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_status_of_a_chain_that_is_not_running(tmp_path):
    line = _one_error_line(dagnet("chain", "status", "--network", f"embedded:{tmp_path / 'none.sqlite'}"))
    assert "no embedded chain state" in line


def test_unknown_network(tmp_path):
    assert "unknown network 'mars'" in _one_error_line(dagnet("chain", "status", "--network", "mars"))


def test_register_with_a_missing_wallet(tmp_path):
    line = _one_error_line(
        dagnet("subnet", "register", "--network", "embedded", "--wallet.name", "ghost", "--wallet.path", str(tmp_path))
    )
    assert "wallet ghost/default" in line


def test_create_dev_wallet_refuses_to_overwrite(tmp_path):
    first = dagnet("wallet", "create-dev", "w", "--wallet.path", str(tmp_path))
    assert first.returncode == 0, first.stderr
    keys = json.loads(first.stdout)
    assert keys["coldkey_ss58"] != keys["hotkey_ss58"]
    assert "wallet w/default" in _one_error_line(dagnet("wallet", "create-dev", "w", "--wallet.path", str(tmp_path)))


def test_a_second_node_on_one_state_file_is_refused(tmp_path):
    state = tmp_path / "chain.sqlite"
    first = subprocess.Popen(
        [sys.executable, "-m", "neurons", "chain", "start", "--state", str(state)], stderr=subprocess.PIPE, text=True
    )
    try:
        assert "listening on" in first.stderr.readline()
        assert "already running" in _one_error_line(dagnet("chain", "start", "--state", str(state)))
    finally:
        first.terminate()
        first.wait(timeout=15)


def test_bench_chain_reports_both_figures():
    result = dagnet("bench", "chain", "--json", "--repeats", "3")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["epoch"]["uids"] == 256 and report["epoch"]["validators"] == 64
    assert report["epoch"]["median_ms"] > 0 and report["metagraph_read"]["median_ms"] > 0
    assert report["metagraph_read"]["uids"] == 256
