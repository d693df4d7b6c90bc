"""What `dagnet bench world` and `bench margin` print (issue 38): every figure whole at 80
columns, a progress bar on a terminal and none when piped, and a last line that says which
targets hold.

Each bench runs once, as a user runs it, with small flags (one world or validator, one
tempo, no drawn families): once piped with ``COLUMNS=80`` and once on a pseudo-terminal
80 columns wide, where stderr is the terminal too.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from bench.margin import Target
from bench.margin import targets_line as margin_line
from bench.world import targets_line as world_line
from bench.world import targets_verdict

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
BENCHES = {
    "world": ["bench", "world", "--tempos", "1", "--final-seeds", "1", "--drawn", "0", "--secrets", "1"],
    "margin": [
        "bench",
        "margin",
        "--validators",
        "1",
        "--tempos",
        "1",
        "--per-tempo",
        "13",
        "--drawn",
        "0",
        "--worlds",
        "1",
    ],
}
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")
_CUT = re.compile(r"[-+]?\d[\d.,%]*…|…[\d.,%]+")
"""An ellipsis that cuts a figure: digits right before it or right after it."""
_PLAYING = "(s) × 1 tempos × "
"""The description of the progress bar's second phase (``1 world(s) × 1 tempos × 40 families``)."""


def _piped(args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "80"}
    return subprocess.run(
        [sys.executable, "-m", "neurons", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )


def _on_a_terminal(args: list[str], columns: int = 80) -> str:
    """What the command writes to a pseudo-terminal ``columns`` wide (stdout and stderr), escapes removed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["TERM"] = "xterm-256color"
    child = subprocess.Popen(
        [sys.executable, "-m", "neurons", *args], cwd=ROOT, stdin=slave, stdout=slave, stderr=slave, env=env
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    text = b"".join(chunks).decode(errors="replace")
    assert child.wait(timeout=60) == 0, text[-3000:]
    return _ANSI.sub("\n", text)


def _no_figure_cut(text: str) -> None:
    """Every table row within 80 columns and no figure cut anywhere (a line of prose may be
    longer: it is soft-wrapped, one line in a file)."""
    lines = text.splitlines()
    rows = [line for line in lines if line[:1] in "┃│┏┡└"]
    assert rows and max(map(len, rows)) <= 80, "\n".join(line for line in rows if len(line) > 80)
    assert not [line for line in lines if _CUT.search(line)], text


@pytest.mark.parametrize("bench", sorted(BENCHES))
def test_piped_at_80_columns_every_figure_is_whole_and_no_progress_is_drawn(bench: str) -> None:
    done = _piped(BENCHES[bench])
    assert done.returncode == 0, done.stderr[-3000:]
    _no_figure_cut(done.stdout)
    assert "planning" not in done.stdout + done.stderr and _PLAYING not in done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"targets( hold on .+|: \d+ of \d+ hold.*)", last), last


@pytest.mark.parametrize("bench", sorted(BENCHES))
def test_on_a_terminal_a_progress_bar_runs_and_the_tables_still_fit(bench: str) -> None:
    shown = _on_a_terminal(BENCHES[bench])
    assert "planning good and naive+retries" in shown and _PLAYING in shown, shown[-2000:]
    tables = shown[shown.rindex(_PLAYING) :].split("\n", 1)[1]  # what is printed once the bar has gone
    _no_figure_cut(tables)


def test_the_last_lines_name_the_targets_that_hold_and_each_miss() -> None:
    entry = {
        "median_headroom": 0.12,
        "headroom_ok": True,
        "ratio_ok": True,
        "weight_ratio": 3.0,
        "recovered": 0.9,
        "recovered_ok": True,
    }
    result = {
        "summary": {
            "rag": entry,
            "code": entry | {"median_headroom": 0.04, "headroom_ok": False, "recovered": 0.2, "recovered_ok": False},
        }
    }
    verdict = targets_verdict(result)
    assert verdict == {"rag": [], "code": ["oracle − good +0.040 < 0.1", "the learner's gain 20% of it < 50%"]}
    assert world_line(verdict) == "targets hold on rag; missed on code"
    assert world_line({"code": ["x"]}) == "targets hold on no type; missed on code"
    assert margin_line([Target("a", []), Target("b", ["x (validator 0)"]), Target("c", [])]) == (
        "targets: 2 of 3 hold; missed: b"
    )
    assert margin_line([Target("a", [])]) == "targets: 1 of 1 hold"
    vacuous = Target("d", [], ["the learner is not a beater on validator 0"])
    assert margin_line([Target("a", []), vacuous]) == "targets: 1 of 2 hold; n/a: d"  # n/a is no hold
