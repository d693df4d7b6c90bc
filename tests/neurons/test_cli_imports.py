"""`dagnet --help` and `dagnet run` load no web server and no chain SDK: the miner
command imports them only when a miner starts (neurons/commands/); `dagnet --help` loads
no executor either (`dagnet run`, `plan check` and `score` import it when they run)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("uvicorn", "fastapi", "starlette", "bittensor")
ENGINE = ("engine.executor", "engine.evaluate")
_PROBE = """
import sys
from neurons.cli import main
try:
    main(sys.argv[1:])
finally:
    print("loaded:" + ",".join(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)
"""


@pytest.mark.parametrize(
    "args",
    [["--help"], ["run", "examples/seed000_partial.json", "--json"], ["plan", "check", "examples/cycle.json"]],
    ids=" ".join,
)
def test_command_loads_no_server_or_chain_sdk(args: list[str]) -> None:
    probe = _PROBE.format(heavy=HEAVY)
    result = subprocess.run([sys.executable, "-c", probe, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode in (0, 1, 2), result.stderr
    assert result.stderr.splitlines()[-1] == "loaded:"


def test_help_loads_no_executor() -> None:
    probe = _PROBE.format(heavy=HEAVY + ENGINE)
    result = subprocess.run(
        [sys.executable, "-c", probe, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[-1] == "loaded:"
