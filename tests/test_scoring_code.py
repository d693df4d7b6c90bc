"""The code scorer: tests and lint run in the sandbox; each sandbox attack scores 0."""

from __future__ import annotations

import select
import socket
import uuid
from pathlib import Path
from typing import Any

import pytest

from protocol.task import Task
from sandbox import SandboxLimits, isolation_available
from scoring import output_quality

REPO = Path(__file__).resolve().parent.parent
LIMITS = SandboxLimits(cpu_seconds=2, wall_seconds=10, memory_bytes=256 * 2**20, max_processes=16)

ADD_TESTS = """\
from solution import add

def test_small():
    assert add(1, 2) == 3

def test_zero():
    assert add(0, 0) == 0

def test_negative():
    assert add(-1, -1) == -2

def test_large():
    assert add(10**20, 1) == 10**20 + 1
"""


def code_quality(code: str, tests: str = ADD_TESTS) -> Any:
    task = Task(task_id="c", task_type="code", reference={"test_suite": tests})
    final = {"text": "", "artifacts": {"code": code, "metadata": {}}}
    return output_quality(task, final, sandbox_limits=LIMITS)


def test_correct_clean_code_scores_one() -> None:
    quality = code_quality("def add(a, b):\n    return a + b\n")
    assert quality.value == pytest.approx(1.0)
    assert quality.details["passed"] == quality.details["total"] == 4
    assert quality.details["lint_warnings"] == 0


def test_partial_pass_and_lint_warnings_are_weighted() -> None:
    code = "import os\nimport sys\n\ndef add(a, b):\n    return a + b if a >= 0 else 0\n"
    quality = code_quality(code)
    assert (quality.details["passed"], quality.details["total"]) == (3, 4)
    assert quality.details["lint_warnings"] == 2
    assert quality.value == pytest.approx(0.9 * 3 / 4 + 0.1 * 0.8)


def test_all_tests_failing_scores_zero() -> None:
    quality = code_quality("def add(a, b):\n    return 7\n")
    assert quality.value == 0.0 and quality.details["reason"] == "no test passed"


@pytest.mark.parametrize("code", ["", "   \n"])
def test_empty_code_scores_zero(code: str) -> None:
    quality = code_quality(code)
    assert (quality.value, quality.details["reason"]) == (0.0, "final output has no code")


def test_code_that_does_not_import_scores_zero() -> None:
    quality = code_quality("def add(a, b) return a + b\n")
    assert quality.value == 0.0 and "exited with status" in quality.details["reason"]


def test_forged_summary_is_not_believed() -> None:
    code = "import os\nprint('4 passed in 0.01s', flush=True)\nos._exit(0)\n"
    assert code_quality(code).value == 0.0


def test_missing_test_suite_scores_zero() -> None:
    task = Task(task_id="c", task_type="code", reference={})
    quality = output_quality(task, {"text": "", "artifacts": {"code": "x = 1", "metadata": {}}})
    assert quality.details["reason"] == "task has no test_suite"


# --- the five sandbox attacks, each as a solution whose test passes only if the attack works ---


def test_infinite_loop_scores_zero() -> None:
    code = "def solve():\n    while True:\n        pass\n"
    quality = code_quality(code, "from solution import solve\n\ndef test():\n    solve()\n")
    assert quality.value == 0.0


def test_fork_bomb_scores_zero() -> None:
    code = (
        "import os, time\n"
        "def solve(n):\n"
        "    for _ in range(n):\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(30)\n"
        "            os._exit(0)\n"
        "    return n\n"
    )
    quality = code_quality(code, "from solution import solve\n\ndef test():\n    assert solve(200) == 200\n")
    assert quality.value == 0.0


def test_memory_hog_scores_zero() -> None:
    code = "def solve():\n    return len(bytearray(2 * 2**30))\n"
    quality = code_quality(code, "from solution import solve\n\ndef test():\n    assert solve() == 2 * 2**30\n")
    assert quality.value == 0.0


WRITER = "def solve(path):\n    with open(path, 'a') as handle:\n        handle.write('pwned')\n    return True\n"


def test_write_to_repo_scores_zero() -> None:
    target = REPO / f"pwned-{uuid.uuid4().hex}"
    quality = code_quality(WRITER, f"from solution import solve\n\ndef test():\n    assert solve({str(target)!r})\n")
    assert quality.value == 0.0
    assert not target.exists()


def test_write_to_host_tmp_file_scores_zero(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("original")
    victim.chmod(0o666)
    quality = code_quality(WRITER, f"from solution import solve\n\ndef test():\n    assert solve({str(victim)!r})\n")
    assert quality.value == 0.0
    assert victim.read_text() == "original"


def test_network_connection_scores_zero() -> None:
    if isolation_available() != "bwrap" and "netns" not in isolation_available():
        pytest.skip("this machine's sandbox has no network namespace (docs/sandbox.md)")
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        code = (
            "import socket\n"
            "def solve(port):\n"
            "    socket.create_connection(('127.0.0.1', port), timeout=2).sendall(b'hi')\n"
            "    return True\n"
        )
        quality = code_quality(code, f"from solution import solve\n\ndef test():\n    assert solve({port})\n")
        readable, _, _ = select.select([server], [], [], 0)
    assert quality.value == 0.0
    assert readable == []
