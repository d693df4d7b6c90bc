"""`scripts/bootstrap`: the default set-up (what CI runs) installs everything the tests
need; `--runtime` only what a miner or validator runs on; both end with the next command.

Run against stand-ins (a `dpkg-query` that says every package is installed and logs what
it was asked, a `.venv/bin/python` that logs its arguments): what the script asks for,
not what apt and pip do with it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEST_TOOLS = {"prometheus", "chromium", "docker-compose"}


def _bootstrap(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str], list[str]]:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "bootstrap", tmp_path / "scripts" / "bootstrap")
    fake = tmp_path / "fake"
    fake.mkdir()
    asked, ran = tmp_path / "asked.log", tmp_path / "ran.log"
    (fake / "dpkg-query").write_text(
        f'#!/bin/sh\nfor a; do last="$a"; done\necho "$last" >> {asked}\nprintf "install ok installed"\n'
    )
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").write_text(f'#!/bin/sh\necho "$*" >> {ran}\n')
    for script in (fake / "dpkg-query", tmp_path / ".venv" / "bin" / "python"):
        script.chmod(0o755)
    done = subprocess.run(
        ["bash", str(tmp_path / "scripts" / "bootstrap"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": f"{fake}:/usr/bin:/bin"},
    )
    read = lambda log: log.read_text().splitlines() if log.exists() else []  # noqa: E731
    return done, read(asked), read(ran)


def test_the_default_set_up_installs_the_test_tools_and_extras(tmp_path: Path) -> None:
    done, asked, ran = _bootstrap(tmp_path)
    assert done.returncode == 0, done.stderr
    assert set(asked) == {"bubblewrap", *TEST_TOOLS}
    assert ran[-1] == "-m pip install -q -e .[test]"
    assert done.stdout.splitlines()[-1].startswith(f"next: {readme_test_command()}  ")


def readme_test_command() -> str:
    """The command README's "Run the tests" block runs after `scripts/bootstrap &&`."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("Run the tests:", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    setup, command = block.strip().split(" && ")
    assert setup == "scripts/bootstrap"
    return command


def test_ci_runs_the_readme_test_command_as_written() -> None:
    command = readme_test_command()
    assert command.startswith(".venv/bin/python -m pytest -n ")  # the suite on pytest-xdist workers (tests/conftest.py)
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert ci.count(command) == 1 and ci.index("scripts/bootstrap") < ci.index(command)


def test_the_runtime_set_up_installs_what_a_miner_or_validator_needs_only(tmp_path: Path) -> None:
    done, asked, ran = _bootstrap(tmp_path, "--runtime")
    assert done.returncode == 0, done.stderr
    assert asked == ["bubblewrap"]
    assert ran[-1] == "-m pip install -q -e ."
    assert done.stdout.splitlines()[-1].startswith("next: .venv/bin/dagnet ")


@pytest.mark.parametrize("flag", ["--runtme", "runtime"])
def test_an_unknown_option_is_one_error_line(tmp_path: Path, flag: str) -> None:
    done, asked, _ = _bootstrap(tmp_path, flag)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and flag in done.stderr and asked == []
