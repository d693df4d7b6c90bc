"""Every bad input to `dagnet`: one `error:` line on stderr naming what is wrong, exit 2.

The table is the contract of docs/cli.md ("Exit codes and errors"); add a row for
every new way a user can get a command wrong.
"""

import contextlib
import json
import shutil
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from neurons.cli import app
from support.chain import without_backoff
from support.tasks import write_taskset

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PLAN = EXAMPLES / "seed000_partial.json"
STATE_FIXTURE = ROOT / "tests" / "fixtures" / "state_main_6197a53.sqlite"
VALIDATE = ["validator", "--dev-key", "//Alice", "--port", "0", "--network", "ws://127.0.0.1:1", "--state"]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    made = {
        "bad_json": "{not json",
        "list_json": "[1, 2]",
        "not_a_report": '{"status": "completed"}',
        "unknown_action": json.dumps({"nodes": [{"id": "a", "subnet": "sn1", "action": "teleport"}]}),
        "bad_node_id": json.dumps({"nodes": [{"id": "a b", "subnet": "sn1", "action": "echo"}]}),
        "settings_not_object": "[1]",
        "towns_report": json.dumps(
            {
                "status": "completed",
                "completion_ratio": 1.0,
                "latency_s": 1.0,
                "cost_tao": 0.0,
                "retries": 0,
                "unplanned_retries": 0,
                "timeouts": 0,
                "hard_failures": 0,
                "task_id": "rag_towns",
                "seed": 3,
            }
        ),
    }
    paths = {name: tmp_path / f"{name}.json" for name in made}
    for name, content in made.items():
        paths[name].write_text(content)
    paths["latin1"] = tmp_path / "latin1.json"
    paths["latin1"].write_bytes(b'{"nodes": "\xff"}')
    paths["dir"] = tmp_path
    paths["taskset"] = write_taskset(tmp_path / "taskset.json", ["rag_towns"], seed=3)
    paths["missing"] = tmp_path / "missing.json"
    paths.update(_state_files(tmp_path))
    return paths


def _state_files(folder: Path) -> dict[str, Path]:
    """State files a validator refuses: not a database, a weak secret, a newer schema."""
    paths = {name: folder / f"{name}.sqlite" for name in ("corrupt_state", "weak_state", "newer_state")}
    paths["corrupt_state"].write_bytes(b"SQLite format 3\x00" + b"\xff" * 4096)
    for name, statement in (
        ("weak_state", "UPDATE meta SET value = 'abc' WHERE key = 'instance_secret'"),
        ("newer_state", "PRAGMA user_version = 99"),
    ):
        shutil.copyfile(STATE_FIXTURE, paths[name])
        with contextlib.closing(sqlite3.connect(paths[name])) as conn, conn:
            conn.execute(statement)
    return paths


# (arguments, what stderr must say); {name} is a file from the fixture.
BAD_INPUTS = [
    (["run", "{dir}"], "is a directory, not a file"),
    (["plan", "check", "{dir}"], "is a directory, not a file"),
    (["run", "{missing}"], "missing.json: no such file"),
    (["run", "{bad_json}"], "not valid JSON"),
    (["run", "{latin1}"], "not UTF-8 text"),
    (["run", "{list_json}"], "expected a JSON object, got list"),
    (["run", "{bad_node_id}"], "nodes.0.id: String should match pattern"),
    (["run", "{taskset}"], "is a task set, not a plan"),
    (["run", str(PLAN), "--task", str(PLAN)], "is a workflow plan, not a task"),
    (["plan", "make", str(PLAN)], "is a workflow plan, not a task"),
    (["run", str(PLAN), "--task", "{taskset}"], "is a task set: choose a task with --task-id"),
    (["run", str(PLAN), "--task", "{taskset}", "--task-id", "nope"], "no task with id 'nope'"),
    (["run", str(EXAMPLES / "cycle.json")], "cycle: a -> b -> a"),
    (["plan", "check", "{unknown_action}"], "unknown action 'teleport'"),
    (["plan", "make", "rag_towns", "--planner", "psychic"], "unknown planner 'psychic'"),
    (["score", "{list_json}", "--task", "rag_towns"], "not a run report: expected a JSON object"),
    (["score", "{not_a_report}", "--task", "rag_towns"], "not a run report: missing 'completion_ratio'"),
    (["score", "{not_a_report}"], "Missing option '--task'"),
    (["plan", "check"], "Missing argument 'PLAN'"),
    (["run", str(PLAN), "--max-nodes", "0"], "Invalid value for '--max-nodes'"),
    (["run", "--bogus"], "No such option: --bogus"),
    (["teleport"], "No such command 'teleport'"),
    (["miner"], "give exactly one of a wallet (--wallet-name) or a dev key (--dev-key)"),
    (["miner", "--dev-key", "//Bob", "--set", "burst"], "--set 'burst': expected KEY=VALUE"),
    (
        ["miner", "--dev-key", "//Bob", "--set", "rate_limit.burst=0"],
        "rate_limit.burst: Input should be greater than or equal to 1",
    ),
    (["miner", "--dev-key", "//Bob", "--set", "rate_limt.burst=2"], "rate_limt: Extra inputs are not permitted"),
    (["miner", "--dev-key", "//Bob", "--config", "{missing}"], "missing.json: no such file"),
    (["miner", "--dev-key", "//Bob", "--config", "{settings_not_object}"], "must hold an object of settings"),
    (["miner", "--dev-key", "//Bob", "--planner", "psychic"], "unknown planner 'psychic'"),
    (["miner", "--dev-key", "not a uri"], "--dev-key 'not a uri': not a usable key URI"),
    (["miner", "--wallet-name", "nobody", "--wallet-path", "{dir}"], "wallet nobody/default: cannot load the hotkey"),
    (["miner", "--wallet.name", "nobody", "--wallet.path", "{dir}"], "wallet nobody/default: cannot load the hotkey"),
    (
        ["miner", "--wallet.name", "w", "--dev-key", "//Bob"],
        "give exactly one of a wallet (--wallet-name) or a dev key",
    ),
    (["validator"], "give exactly one of a wallet (--wallet-name) or a dev key (--dev-key)"),
    (["validator", "--dev-key", "not a uri"], "--dev-key 'not a uri': not a usable key URI"),
    (
        ["validator", "--wallet.name", "nobody", "--wallet.hotkey", "hk", "--wallet.path", "{dir}"],
        "wallet nobody/hk: cannot load the hotkey",
    ),
    (["validator", "--bogus"], "No such option: --bogus"),
    (
        ["subnet", "register", "--network", "local", "--dev-key", "not a uri"],
        "--dev-key 'not a uri': not a usable key URI",
    ),
    (
        ["subnet", "create", "--network", "local", "--dev-key", "not a uri"],
        "--dev-key 'not a uri': not a usable key URI",
    ),
    (["subnet", "create", "--dev-key", "//Alice", "--network", "nowhere"], "unknown network 'nowhere'"),
    (["run", str(PLAN), "--inputs", "[1]"], "--inputs: expected a JSON object, got list"),
    (["run", str(PLAN), "--inputs", "{{not json"], "--inputs: not valid JSON"),
    (["run", str(PLAN), "--inputs", "{missing}"], "missing.json: no such file"),
    (["run", str(PLAN), "--inputs", "{{}}", "--task", "rag_towns"], "give --task or --inputs, not both"),
    (["run", str(PLAN), "--seed", "3"], "--seed needs --task"),
    (["run", str(PLAN), "--task-id", "a"], "--task-id needs --task"),
    (["plan", "check", str(PLAN), "--task-id", "a"], "--task-id needs --task"),
    (
        ["run", str(PLAN), "--task", "{taskset}", "--task-id", "rag_towns", "--seed", "3"],
        "--seed draws an instance of a task family",
    ),
    (
        ["score", "{towns_report}", "--task", "rag_rivers"],
        "the report is a run of task 'rag_towns', not 'rag_rivers' (--task)",
    ),
    (["tasks", "show", "teleport"], "no task family 'teleport'"),
    (["chain", "status", "--network", "ws://127.0.0.1:1"], "cannot reach the chain at ws://127.0.0.1:1: [Errno 111]"),
    (["subnet", "list", "--network", "ws://127.0.0.1:1"], "cannot reach the chain at ws://127.0.0.1:1: [Errno 111]"),
    (
        ["subnet", "create", "--dev-key", "//Alice", "--network", "ws://127.0.0.1:1"],
        "cannot reach the chain at ws://127.0.0.1:1",
    ),
    (["localnet", "--dir", "{dir}"], "not a new or empty folder"),
    (["localnet", "--dir", "{bad_json}"], "not a new or empty folder"),
    (
        ["subnet", "stake", "1", "--network", "local", "--wallet.name", "nobody", "--wallet.path", "{dir}"],
        "wallet nobody/default: cannot load the hotkey",
    ),
    *[
        (command, message)
        for state, message in (
            ("{corrupt_state}", "cannot be opened: file is not a database"),
            (
                "{weak_state}",
                (
                    "has a weak instance secret ('abc' is not a number): its history cannot be replayed "
                    "under a new secret. Start with --reset"
                ),
            ),
            ("{newer_state}", "is of schema version 99, newer than this dagnet's"),
        )
        for command in (
            [*VALIDATE, state],
            ["validator", "records", "--state", state],
            ["validator", "--replay", "1", "--state", state],
        )
    ],
    (["subnet", "stake", "-5", "--network", "local"], "-5: a negative number is not accepted here"),
    (["subnet", "stake", "-12", "--network", "local"], "a negative number is not accepted here"),
]


@pytest.mark.parametrize(("args", "message"), BAD_INPUTS, ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_bad_input_is_one_line_and_exit_2(files: dict[str, Path], args: list[str], message: str, monkeypatch) -> None:
    without_backoff(monkeypatch)  # an unreachable chain: the same retries, at once
    result = CliRunner().invoke(app, [arg.format(**files) for arg in args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert message in lines[0]


def test_a_report_of_the_task_it_is_scored_against_is_scored(files: dict[str, Path]) -> None:
    result = CliRunner().invoke(app, ["score", str(files["towns_report"]), "--task", "rag_towns", "--json"])
    assert result.exit_code == 0, result.output
    assert "S" in json.loads(result.stdout)


GROUPS = [[]] + [
    [group.name] for group in app.registered_groups if not group.typer_instance.info.invoke_without_command
]
"""Every group that needs a command; one that is a command itself when bare (``validator``) runs instead."""


@pytest.mark.parametrize("group", GROUPS, ids=lambda g: " ".join(["dagnet", *g]))
def test_a_bare_group_prints_its_help_readable_and_exits_0(group: list[str]) -> None:
    result = CliRunner().invoke(app, group, prog_name="dagnet")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"Usage: {' '.join(['dagnet', *group])} ") and "Commands:" in lines
    assert max(map(len, lines)) <= 80  # click wraps the help: not one flattened line


def test_the_bare_group_test_sees_the_groups() -> None:
    assert {"plan", "tasks", "chain", "wallet", "subnet", "bench"} <= {g[0] for g in GROUPS if g}


@pytest.mark.e2e  # a miner process, started from the installed package
def test_a_miner_port_in_use_is_one_line_exit_2_and_leaves_nothing(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "neurons",
                "miner",
                "--dev-key",
                "//Bob",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                "2",
                "--network",
                "ws://127.0.0.1:1",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"error: port {port} is in use (--port)"]
    assert list(tmp_path.iterdir()) == []


def test_a_validator_that_never_steps_leaves_no_state_file_it_made(tmp_path: Path, monkeypatch) -> None:
    without_backoff(monkeypatch)
    made, kept = tmp_path / "new" / "validator.sqlite", tmp_path / "kept.sqlite"
    shutil.copyfile(STATE_FIXTURE, kept)
    for state in (made, kept):
        result = CliRunner().invoke(app, [*VALIDATE, str(state)])
        assert result.exit_code == 2 and "cannot reach the chain" in result.stderr, result.output
    assert list(made.parent.iterdir()) == []  # no file, no -wal, no -shm
    assert kept.exists()  # a file it did not make stays, whatever happened


def test_records_of_a_state_file_without_any_say_so_apart_from_no_match(tmp_path: Path) -> None:
    from validator.state import ValidatorState

    ValidatorState(tmp_path / "empty.sqlite").close()
    shutil.copyfile(STATE_FIXTURE, tmp_path / "full.sqlite")
    for name, args, line in (
        ("empty", [], "no record in the state file yet"),
        ("empty", ["--miner", "1"], "no record in the state file yet"),
        ("full", ["--miner", "9"], "no record matches"),
    ):
        result = CliRunner().invoke(app, ["validator", "records", "--state", str(tmp_path / f"{name}.sqlite"), *args])
        assert result.exit_code == 0 and result.stdout.splitlines() == [line], result.output


def test_an_unreachable_chain_names_it_without_the_sdk_s_hint() -> None:
    result = CliRunner().invoke(app, ["chain", "status", "--network", "ws://127.0.0.1:1"])
    assert result.exit_code == 2
    assert "Client connection is not open" not in result.stderr and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("plan", "code"),
    [("seed004_ages.json", 0), ("seed000_partial.json", 1), ("cycle.json", 2)],
)
def test_run_exit_code_says_completed_not_completed_or_invalid(plan: str, code: int) -> None:
    assert CliRunner().invoke(app, ["run", str(EXAMPLES / plan), "--json"]).exit_code == code


@pytest.mark.e2e  # a neuron process, started from outside the checkout
@pytest.mark.parametrize("module", ["neurons.miner", "neurons.validator"])
def test_neuron_module_refuses_an_unknown_flag_in_one_line(tmp_path: Path, module: str) -> None:
    """``python -m neurons.miner`` is ``dagnet miner``: run from outside the checkout, so
    every module it imports must come from the installed package."""
    done = subprocess.run(
        [sys.executable, "-m", module, "--bogus"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: dagnet {module.split('.')[1]}: No such option: --bogus"), (
        done.stderr
    )


def test_version() -> None:
    from importlib.metadata import version

    from protocol.synapse import SCORING_VERSION

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout == f"dagnet {version('dagnet')} (scoring version {SCORING_VERSION})\n"
