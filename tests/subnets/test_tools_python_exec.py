"""``python_exec``: code runs in the sandbox (another process), stdout comes back, failures are clean."""

import os

import pytest

from sandbox import SandboxLimits
from subnets.base import ToolContext, ToolError
from subnets.python_exec import make_python_exec

LIMITS = SandboxLimits(cpu_seconds=5, wall_seconds=20)
TOOL = make_python_exec(LIMITS)


def ctx(timeout_seconds: float = 20.0) -> ToolContext:
    return ToolContext(task_id="t", node_id="py", attempt=1, timeout_seconds=timeout_seconds)


async def test_stdout_args_and_stdin():
    code = "import sys\nprint(sys.argv[1:], sys.stdin.read().upper())"
    output = (await TOOL({"code": code, "args": ["a", "b"], "stdin": "hi"}, ctx())).output
    assert output.text == "['a', 'b'] HI\n"
    assert output.artifacts.code == code
    assert output.artifacts.metadata["returncode"] == 0


async def test_code_runs_in_another_process():
    output = (await TOOL({"code": "import os; print(os.getpid())"}, ctx())).output
    assert int(output.text) != os.getpid()


async def test_nonzero_exit_fails_with_the_stderr_tail():
    with pytest.raises(ToolError, match=r"(?s)exit status 1: .*ZeroDivisionError: division by zero"):
        await TOOL({"code": "print('partial')\n1 / 0"}, ctx())


async def test_stdout_over_16_kib_is_a_failure():
    with pytest.raises(ToolError, match="stdout exceeds 16384 bytes"):
        await TOOL({"code": "print('x' * 20000)"}, ctx())


async def test_the_node_timeout_caps_the_cpu_time():
    with pytest.raises(ToolError, match="CPU limit exceeded"):
        await TOOL({"code": "while True:\n    pass"}, ctx(timeout_seconds=1.0))


async def test_a_program_and_its_stdin_may_fill_the_input_bound_exactly():
    code = "import sys\nprint(len(sys.stdin.read()))\n"
    stdin = "x" * (8 * 1024 - len(code))
    assert (await TOOL({"code": code, "stdin": stdin}, ctx())).output.text == f"{len(stdin)}\n"


async def test_a_sleeping_program_is_stopped_by_the_wall_cap():
    with pytest.raises(ToolError, match=r"timed out \(wall limit 3s\)"):
        await TOOL({"code": "import time\ntime.sleep(30)"}, ctx(timeout_seconds=1.0))


@pytest.mark.parametrize(
    "params, field",
    [
        ({}, "code"),
        ({"code": ""}, "code"),
        ({"code": "x" * (8 * 1024 + 1)}, "code"),
        ({"code": "é" * (5 * 1024)}, "code"),
        ({"code": "1", "stdin": "x" * (8 * 1024 + 1)}, "stdin"),
        ({"code": "#" * 5000, "stdin": "x" * 5000}, "code, stdin and args"),
        ({"code": "1", "args": "a b"}, "args"),
        ({"code": "1", "env": {}}, "env"),
    ],
)
async def test_bad_params_name_the_field(params, field):
    with pytest.raises(ToolError, match=field):
        await TOOL(params, ctx())
