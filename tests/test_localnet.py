"""`dagnet localnet` end to end: separate processes on the embedded chain."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DAGNET = [sys.executable, "-m", "neurons"]


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(int(entry.name))
    return found


def test_ctrl_c_stops_every_process_and_prints_what_was_reached(tmp_path: Path) -> None:
    run_dir = tmp_path / "net"
    process = subprocess.Popen(
        [*DAGNET, "localnet", "--miners", "2", "--duration", "600", "--block-time", "1", "--json", "--dir", str(run_dir)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 180
    validator_log = run_dir / "validator.log"
    while not (validator_log.exists() and "listening on" in validator_log.read_text()):
        assert process.poll() is None, process.stderr.read()[-3000:]
        assert time.monotonic() < deadline, "the validator never started"
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err[-3000:]
    summary = json.loads(out)
    assert summary["block"] >= summary["start_block"] > 0
    assert [row["strategy"] for row in summary["miners"]] == ["good", "naive"]
    assert not _processes_mentioning(str(run_dir))
