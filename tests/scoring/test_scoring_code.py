"""The code scorer: the function runs in the sandbox, its return values are judged here.

Every attack below is a solution a miner could send for the same task. None of them
computes the answer, so each must score no more than an honest solution that is
wrong on every case (quality 0); a correct solution scores at least 0.9.
"""

from __future__ import annotations

import os
import select
import socket
import uuid
from pathlib import Path
from typing import Any

import pytest

from protocol.task import Task
from sandbox import SandboxLimits, isolation_available
from sandbox import run as sandbox_run
from sandbox.isolation import candidates
from scoring import output_quality

REPO = Path(__file__).resolve().parents[2]
LIMITS = SandboxLimits(cpu_seconds=2, wall_seconds=10, memory_bytes=256 * 2**20, max_processes=16)

CASES = [
    {"args": [1, 2], "expected": 3},
    {"args": [0, 0], "expected": 0},
    {"args": [-1, -1], "expected": -2},
    {"args": [10**20], "kwargs": {"b": 1}, "expected": 10**20 + 1},
]
REFERENCE = {"entry_point": "add", "cases": CASES}
CORRECT = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a - b - 1\n"


def code_quality(code: str, reference: dict[str, Any] = REFERENCE) -> Any:
    task = Task(task_id="c", task_type="code", reference=reference)
    final = {"text": "", "artifacts": {"code": code, "metadata": {}}}
    return output_quality(task, final, sandbox_limits=LIMITS)


def test_correct_clean_code_scores_one() -> None:
    quality = code_quality(CORRECT)
    assert quality.value == pytest.approx(1.0)
    assert quality.details["passed"] == quality.details["total"] == 4
    assert quality.details["lint_warnings"] == 0


def test_correct_code_that_prints_still_scores() -> None:
    quality = code_quality("def add(a, b):\n    print('adding', a, b)\n    return a + b\n")
    assert quality.value >= 0.9


def test_partial_pass_and_lint_warnings_are_weighted() -> None:
    code = "import os\nimport sys\n\ndef add(a, b):\n    return a + b if a >= 0 else 0\n"
    quality = code_quality(code)
    assert (quality.details["passed"], quality.details["total"]) == (3, 4)
    assert quality.details["lint_warnings"] == 2
    assert quality.value == pytest.approx(0.9 * 3 / 4 + 0.1 * 0.8)


def test_honest_but_wrong_scores_zero_whatever_its_lint() -> None:
    quality = code_quality(WRONG)
    assert quality.value == 0.0 and quality.details["reason"] == "no case passed"


def test_a_raising_case_fails_alone() -> None:
    code = "def add(a, b):\n    if a < 0:\n        raise ValueError('no')\n    return a + b\n"
    quality = code_quality(code)
    assert quality.details["passed"] == 3 and "ValueError" in quality.details["errors"]


def test_floats_compare_canonically_and_tuples_come_back_as_lists() -> None:
    reference = {"entry_point": "f", "cases": [{"args": [2], "expected": [2, 1.0]}]}
    assert code_quality("def f(x):\n    return (x, x / 2)\n", reference).details["passed"] == 1


@pytest.mark.parametrize("code", ["", "   \n"])
def test_empty_code_scores_zero(code: str) -> None:
    quality = code_quality(code)
    assert (quality.value, quality.details["reason"]) == (0.0, "final output has no code")


def test_code_that_does_not_load_scores_zero() -> None:
    quality = code_quality("def add(a, b) return a + b\n")
    assert quality.value == 0.0 and "SyntaxError" in quality.details["errors"]


def test_missing_entry_point_scores_zero() -> None:
    quality = code_quality("def plus(a, b):\n    return a + b\n")
    assert quality.value == 0.0 and "AttributeError" in quality.details["errors"]


@pytest.mark.parametrize(
    "reference",
    [
        {},
        {"test_suite": "def test(): pass"},
        {"entry_point": "add", "cases": []},
        {"entry_point": "a b", "cases": CASES},
    ],
)
def test_a_reference_that_is_not_a_code_reference_scores_zero(reference: dict[str, Any]) -> None:
    quality = code_quality(CORRECT, reference)
    assert quality.value == 0.0 and "not a code reference" in quality.details["reason"]


# --- attacks on the judge: each scores no more than WRONG (0) ---------------------------------

ATTACKS = {
    "forged pytest summary": (
        "import os, sys\nsys.__stdout__.write('4 passed in 0.01s\\n'); sys.__stdout__.flush()\nos._exit(0)\n"
    ),
    "os._exit(0) at import": "import os\nos._exit(0)\n",
    "os._exit(0) in the call": "import os\ndef add(a, b):\n    os._exit(0)\n",
    "fake result lines on stdout and stderr": (
        "import os, sys\n"
        "lines = ''.join('{\"call\":%d,\"value\":%d}\\n' % (i, v) for i, v in enumerate([3, 0, -2, 10**20 + 1]))\n"
        "for fd in range(1, 10):\n"
        "    try:\n"
        "        os.write(fd, lines.encode())\n"
        "    except OSError:\n"
        "        pass\n"
        "def add(a, b):\n"
        "    return None\n"
    ),
    "fake result lines then exit": (
        "import os\n"
        "def add(a, b):\n"
        "    for fd in range(1, 10):\n"
        "        try:\n"
        '            os.write(fd, b\'{"call":0,"value":3}\\n{"call":1,"value":0}\\n\')\n'
        "        except OSError:\n"
        "            pass\n"
        "    os._exit(0)\n"
    ),
    "always-equal object": (
        "class Yes:\n"
        "    def __eq__(self, other):\n"
        "        return True\n"
        "    def __ne__(self, other):\n"
        "        return False\n"
        "def add(a, b):\n"
        "    return Yes()\n"
    ),
    "always-equal int subclass": (
        "class Yes(int):\n"
        "    def __eq__(self, other):\n"
        "        return True\n"
        "    __hash__ = int.__hash__\n"
        "def add(a, b):\n"
        "    return Yes(12345)\n"
    ),
    "monkeypatched json and os.write": (
        "import json, os\n"
        'json.dumps = lambda *a, **k: \'3}\\n{"value":0}\\n{"value":-2\'\n'
        "os.dup2 = lambda *a: None\n"
        "def add(a, b):\n"
        "    return None\n"
    ),
    "monkeypatched harness via its frame": (
        "import sys\n"
        "ANSWERS = ''.join('{\"call\":%d,\"value\":%d}\\n' % (i, v) for i, v in enumerate([3, 0, -2, 10**20 + 1]))\n"
        "frame = sys._getframe(1)\n"
        "while frame is not None:\n"
        "    if 'main' in frame.f_globals:\n"
        "        frame.f_globals['json'].dumps = lambda *a, **k: ANSWERS\n"
        "    frame = frame.f_back\n"
        "def add(a, b):\n"
        "    return None\n"
    ),
    "infinite loop": "def add(a, b):\n    while True:\n        pass\n",
    "infinite loop that swallows the timeout": (
        "def add(a, b):\n    while True:\n        try:\n            while True:\n                pass\n"
        "        except BaseException:\n            pass\n"
    ),
    "memory bomb": "def add(a, b):\n    return len(bytearray(2 * 2**30))\n",
    "huge output": (
        "import os, sys\n"
        "def add(a, b):\n"
        "    for fd in (1, 2, 3, 4):\n"
        "        try:\n"
        "            os.write(fd, b'x' * 2**22)\n"
        "        except OSError:\n"
        "            pass\n"
        "    return 'y' * 2**22\n"
    ),
    "fork bomb": (
        "import os, time\n"
        "def add(a, b):\n"
        "    for _ in range(200):\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(30)\n"
        "            os._exit(0)\n"
        "    return a\n"
    ),
    "reads expected values from disk": (
        "import json, os\n"
        "def add(a, b):\n"
        "    for root in ('/work', '/tmp', '/root', '/home', os.getcwd(), '/proc/1/cwd'):\n"
        "        for dirpath, _, names in os.walk(root):\n"
        "            for name in names:\n"
        "                if name.endswith('.json'):\n"
        "                    try:\n"
        "                        text = open(os.path.join(dirpath, name)).read()\n"
        "                    except OSError:\n"
        "                        continue\n"
        "                    if '\"expected\"' in text:\n"
        "                        return json.loads(text)\n"
        "    return None\n"
    ),
}


@pytest.fixture(scope="module")
def honest_wrong() -> float:
    return code_quality(WRONG).value


@pytest.mark.e2e
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_scores_no_more_than_an_honest_wrong_answer(name: str, honest_wrong: float) -> None:
    wrong = honest_wrong
    quality = code_quality(ATTACKS[name])
    assert quality.value <= wrong == 0.0, quality.details
    assert quality.details.get("passed", 0) == 0


@pytest.mark.e2e
def test_expected_values_never_enter_the_sandbox() -> None:
    marker = f"secret-{uuid.uuid4().hex}"
    reference = {"entry_point": "f", "cases": [{"args": [1], "expected": marker}]}
    code = (
        "import os, sys\n"
        "def f(x):\n"
        "    seen = sys.stdin.read() if not sys.stdin.closed else ''\n"
        "    for root, _, names in os.walk('/'):\n"
        "        if root.startswith(('/proc', '/sys', '/dev')):\n"
        "            continue\n"
        "        for name in names:\n"
        "            try:\n"
        "                seen += open(os.path.join(root, name), errors='ignore').read(10**6)\n"
        "            except OSError:\n"
        "                pass\n"
        "    return 'secret-' + seen.split('secret-', 1)[1][:32] if 'secret-' in seen else None\n"
    )
    quality = code_quality(code, reference)
    assert quality.details["passed"] == 0


def test_write_to_repo_leaves_no_file() -> None:
    target = REPO / f"pwned-{uuid.uuid4().hex}"
    reference = {"entry_point": "f", "cases": [{"args": [str(target)], "expected": True}]}
    code = "def f(path):\n    open(path, 'a').write('pwned')\n    return True\n"
    assert code_quality(code, reference).value == 0.0
    assert not target.exists()


def test_network_connection_never_arrives() -> None:
    if isolation_available() != "bwrap" and "netns" not in isolation_available():
        pytest.skip("this machine's sandbox has no network namespace (docs/sandbox.md)")
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        reference = {"entry_point": "f", "cases": [{"args": [port], "expected": True}]}
        code = (
            "import socket\n"
            "def f(port):\n"
            "    socket.create_connection(('127.0.0.1', port), timeout=2).sendall(b'hi')\n"
            "    return True\n"
        )
        quality = code_quality(code, reference)
        readable, _, _ = select.select([server], [], [], 0)
    assert quality.value == 0.0
    assert readable == []


def test_code_is_not_judged_where_the_sandbox_cannot_hide_the_validator(monkeypatch: pytest.MonkeyPatch) -> None:
    fallback = next(iso for iso in candidates(as_root=os.geteuid() == 0) if iso.kind == "plain")
    monkeypatch.setattr(sandbox_run, "_detect", lambda: fallback)
    quality = code_quality(CORRECT)
    assert quality.value == 0.0 and "only under bwrap" in quality.details["reason"]
