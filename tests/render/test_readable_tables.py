"""Tables a person reads fit the terminal: the localnet leaderboard and `dagnet chain status`.

The leaderboard is rendered by a child process on a pseudo-terminal of 80 (and
then 140) columns, as `dagnet localnet` draws it: rich measures the terminal
itself, nothing is told the width.
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

import pytest
from rich.console import Console

from neurons.commands.chain import render_status
from neurons.localnet import LEGEND
from render.columns import ALWAYS, Column, fit_table

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")

ROWS = [
    {
        "uid": uid,
        "strategy": strategy,
        "hotkey": "5F" + "x" * 46,
        "steps_scored": steps,
        "mean_S": mean,
        "mean_S_success": 0.95,
        "mean_S_cost": 0.5,
        "mean_S_latency": 0.77,
        "mean_S_reliability": 1.0,
        "weight": weight,
        "incentive": incentive,
        "emission": emission,
        "mean_margin": margin,
        "beats_reference": beats,
    }
    for uid, strategy, steps, mean, weight, incentive, emission, margin, beats in [
        (1, "good", 123, 0.8765, 0.9731, 0.98765, 1234.56789, 0.0213, 0.41),
        (2, "naive", 118, 0.5512, 0.0269, 0.01235, 12.5, -0.2481, 0.02),
        (3, "invalid", 120, 0.0, 0.0, 0.0, 0.0, -0.8, 0.0),
        (4, "precompute", 9, 0.0, 0.0, 0.0, 0.0, -0.8, 0.0),
    ]
]

_PROGRAM = f"""
from rich.console import Console
from neurons.localnet import Reached, render
rows = {ROWS!r}
reached = Reached(run_dir="/tmp/localnet-20261125-101010", block=1234, blocks_to_epoch=7, tempo=20, steps=42,
                  last_weights_block=1200, end_block=1300, miners=rows)
Console().print(render(reached))
"""


def _on_a_terminal(program: str, columns: int) -> list[str]:
    """What ``program`` prints on a pseudo-terminal ``columns`` wide, escape codes removed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["TERM"] = "xterm-256color"
    child = subprocess.Popen([sys.executable, "-c", program], stdin=slave, stdout=slave, stderr=slave, env=env)
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
    assert child.wait(timeout=60) == 0, b"".join(chunks).decode(errors="replace")
    return [_ANSI.sub("", line) for line in b"".join(chunks).decode().splitlines()]


@pytest.mark.e2e
def test_the_leaderboard_at_80_columns_shows_every_number_whole():
    lines = _on_a_terminal(_PROGRAM, 80)
    assert lines and max(len(line) for line in lines) <= 80, "\n".join(lines)
    table = [line for line in lines if line.startswith("│")]
    assert len(table) == len(ROWS)
    assert LEGEND in lines  # one line, whole
    assert "weights set at block 1200 (34 blocks ago)" in " ".join(line.strip() for line in lines)
    assert not any("…" in line for line in table)
    for row in ROWS:
        line = next(line for line in table if line.split("│")[1].strip() == str(row["uid"]))
        for shown in (
            row["strategy"],
            f"{row['mean_S']:.3f}",
            f"{row['mean_margin']:+.3f}",
            f"{row['incentive']:.3f}",
            f"{row['emission']:.4f}",
        ):
            assert f" {shown} " in line, (shown, line)


@pytest.mark.e2e
def test_the_leaderboard_on_a_wide_terminal_keeps_every_column():
    lines = _on_a_terminal(_PROGRAM, 140)
    header = next(line for line in lines if "strategy" in line)
    for column in (
        "uid",
        "steps",
        "mean S",
        "margin",
        "beats",
        "success",
        "cost",
        "latency",
        "reliab.",
        "weight",
        "incentive",
        "emission",
    ):
        assert column in header


def _status() -> dict:
    neurons = [
        {
            "uid": uid,
            "hotkey": f"5Grw{uid}" + "a" * 44,
            "coldkey": "c",
            "stake": 1000.0 * (uid == 0),
            "validator_permit": uid == 0,
            "incentive": 0.25,
            "dividends": 1.0 * (uid == 0),
            "emission": 123.456789,
            "trust": 0.0,
            "consensus": 0.0,
            "axon": f"http://127.0.0.1:{40000 + uid}",
            "last_update": 1,
            "registered_block": 1,
        }
        for uid in range(5)
    ]
    return {
        "netuid": 1,
        "block": 99,
        "tempo": 20,
        "blocks_until_epoch": 3,
        "weights_rate_limit": 5,
        "immunity_period": 10,
        "commit_reveal_enabled": False,
        "neurons": neurons,
    }


@pytest.mark.parametrize("width", [80, 200])
def test_chain_status_fits_and_never_cuts_an_axon(width):
    console = Console(width=width, record=True, color_system=None)
    render_status(_status(), console)
    lines = console.export_text().splitlines()
    assert max(map(len, lines)) <= width
    for uid in range(5):
        assert any(f"127.0.0.1:{40000 + uid} " in line for line in lines)
        full = f"5Grw{uid}" + "a" * 44
        assert any(full in line for line in lines) == (width == 200)


def test_fit_table_shortens_before_it_drops_and_keeps_always_columns():
    rows = [{"a": "x" * 30, "b": "12345", "c": "0.875"}]
    columns = (
        Column("a", lambda r: r["a"], 2, short=lambda r: r["a"][:4] + "…"),
        Column("b", lambda r: r["b"], 1),
        Column("c", lambda r: r["c"], ALWAYS),
    )

    def headers(width: int) -> list[str]:
        return [column.header for column in fit_table(columns, rows, width).columns]

    assert headers(60) == ["a", "b", "c"]
    table = fit_table(columns, rows, 25)
    assert [c.header for c in table.columns] == ["a", "b", "c"] and list(table.columns[0].cells) == ["xxxx…"]
    assert headers(24) == ["a", "c"] and headers(17) == ["a", "c"]
    assert headers(16) == ["c"] and headers(5) == ["c"]
