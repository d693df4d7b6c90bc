"""The sandbox: normal code runs, and each attack fails inside it with the host unharmed."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import select
import signal
import socket
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

import sandbox
from sandbox import SandboxLimits, SandboxUnavailable, bwrap, run_python, run_python_async
from sandbox import interpreter as sandbox_interpreter
from sandbox import run as sandbox_run
from sandbox.isolation import NONE, RUN_UIDS, candidates

REPO = Path(__file__).resolve().parents[2]
SMALL = SandboxLimits(cpu_seconds=2, wall_seconds=8, memory_bytes=256 * 2**20, max_processes=16)

_AS_ROOT = os.geteuid() == 0
_FALLBACKS = {iso.name: iso for iso in candidates(as_root=_AS_ROOT) if iso.kind != "bwrap"}


@pytest.fixture(params=["best", *_FALLBACKS])
def isolation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs the test under the machine's best isolation, then under each fallback that works here."""
    if request.param == "best":
        return sandbox.isolation_available()
    chosen = _FALLBACKS[request.param]
    if not sandbox_run._probe(chosen):
        pytest.skip(f"fallback {chosen.name} cannot start the interpreter on this machine")
    monkeypatch.setattr(sandbox_run, "_detect", lambda: chosen)
    return chosen.name


@pytest.fixture(autouse=True)
def host_unharmed():
    """After every test the caller keeps its identity and its own limits."""
    before = _identity_and_limits()
    yield
    assert _identity_and_limits() == before


def _identity_and_limits() -> tuple[object, ...]:
    return (os.getuid(), os.getgid(), resource.getrlimit(resource.RLIMIT_NPROC), resource.getrlimit(resource.RLIMIT_AS))


def _processes_with(token: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


# --- normal code -------------------------------------------------------------------------


def test_runs_files_with_args_and_stdin(isolation: str) -> None:
    files = {
        "main.py": "import sys\nprint(sys.stdin.read().upper(), sys.argv[1:], open('data/in.txt').read())\n",
        "data/in.txt": "nested",
    }
    result = run_python(files, ["main.py", "a", "b"], stdin="hello")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "HELLO ['a', 'b'] nested\n"
    assert not result.timed_out and not result.output_truncated
    assert result.isolation == isolation


def test_script_can_write_its_own_work_dir(isolation: str) -> None:
    code = "open('out.txt', 'w').write('ok')\nprint(open('out.txt').read())\n"
    result = run_python({"main.py": code}, ["main.py"])
    assert (result.returncode, result.stdout) == (0, "ok\n")


def test_exit_status_and_stderr_are_reported(isolation: str) -> None:
    result = run_python({}, ["-c", "import sys; sys.stderr.write('boom'); sys.exit(3)"])
    assert (result.returncode, result.stderr) == (3, "boom")


def test_death_by_signal_reports_128_plus_signal(isolation: str) -> None:
    result = run_python({}, ["-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"])
    assert result.returncode == 128 + signal.SIGTERM


def test_environment_is_clean(isolation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGNET_SECRET", "hunter2")
    result = run_python({}, ["-c", "import os; print(sorted(os.environ))"])
    assert "DAGNET_SECRET" not in result.stdout
    assert result.returncode == 0


def test_runs_as_unprivileged_user() -> None:
    if sandbox.isolation_available() != "bwrap" and not _AS_ROOT:
        pytest.skip("without bubblewrap a non-root caller's runs keep its uid")
    result = run_python({}, ["-c", "import os; print(os.getuid(), os.geteuid())"])
    uid, euid = map(int, result.stdout.split())
    assert uid == euid
    assert uid in RUN_UIDS if _AS_ROOT else uid == 65534


def test_each_run_as_root_gets_a_uid_of_its_own() -> None:
    """So RLIMIT_NPROC counts one run's tasks: a fork bomb beside it cannot starve it."""
    if not _AS_ROOT:
        pytest.skip("a non-root caller's runs each get a user namespace of their own")
    uids = {int(run_python({}, ["-c", "import os; print(os.getuid())"]).stdout) for _ in range(3)}
    assert len(uids) == 3


@pytest.mark.e2e
async def test_a_fork_bomb_does_not_starve_a_run_beside_it() -> None:
    bomb = "import os, time\nfor _ in range(40):\n    if os.fork() == 0:\n        time.sleep(20)\n        os._exit(0)\ntime.sleep(20)\n"
    spawner = "import subprocess, sys\nprint(sum(subprocess.run([sys.executable, '-c', 'pass']).returncode == 0 for _ in range(3)))\n"
    bombing = asyncio.ensure_future(
        run_python_async({}, ["-c", bomb], limits=SandboxLimits(max_processes=48, wall_seconds=8))
    )
    result = await run_python_async({}, ["-c", spawner], limits=SandboxLimits(max_processes=4, wall_seconds=20))
    await bombing
    assert result.stdout == "3\n", result.stderr


def test_stdout_and_stderr_are_capped(isolation: str) -> None:
    limits = SandboxLimits(max_output_bytes=1000)
    code = "import sys\nsys.stdout.write('x' * 2_000_000)\nsys.stderr.write('y' * 5000)\n"
    result = run_python({"main.py": code}, ["main.py"], limits=limits)
    assert result.returncode == 0
    assert result.stdout == "x" * 1000 and result.stderr == "y" * 1000
    assert result.output_truncated


def test_work_dir_is_deleted(isolation: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = run_python({"a.py": "x = 1", "d/b.py": ""}, ["-c", "open('junk', 'w').write('x')"])
    assert result.returncode == 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["/etc/x.py", "../x.py", "a/../../x.py", "", "."])
def test_file_names_must_stay_inside_the_work_dir(name: str) -> None:
    with pytest.raises(ValueError, match="relative path"):
        run_python({name: "x"}, ["-c", "pass"])


def test_refuses_when_no_isolation_works(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_run, "_detect", lambda: NONE)
    with pytest.raises(SandboxUnavailable):
        run_python({}, ["-c", "print('never')"])


async def test_blocking_form_works_inside_a_running_loop() -> None:
    result = run_python({}, ["-c", "print(6 * 7)"])
    assert result.stdout == "42\n"


async def test_concurrent_async_runs_are_independent() -> None:
    results = await asyncio.gather(*(run_python_async({}, ["-c", f"print({i})"]) for i in range(4)))
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(4)]


def test_bad_limits_are_rejected() -> None:
    with pytest.raises(ValueError, match="wall_seconds"):
        SandboxLimits(wall_seconds=0)
    with pytest.raises(ValueError, match="max_processes"):
        SandboxLimits(max_processes=-1)


# --- attacks -----------------------------------------------------------------------------


@pytest.mark.e2e
def test_cpu_bound_infinite_loop_is_stopped(isolation: str) -> None:
    limits = SandboxLimits(cpu_seconds=1, wall_seconds=10)
    result = run_python({"main.py": "while True:\n    pass\n"}, ["main.py"], limits=limits)
    assert result.timed_out or result.returncode in (128 + signal.SIGXCPU, 128 + signal.SIGKILL)


def test_wall_timeout_kills_the_whole_run(isolation: str) -> None:
    token = f"dagnet-sleeper-{uuid.uuid4().hex}"
    code = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)  # {token}'])\n"
        "time.sleep(60)\n"
    )
    result = run_python({}, ["-c", code + f"# {token}"], limits=SandboxLimits(wall_seconds=1.5))
    assert result.timed_out and result.returncode is None
    assert _processes_with(token) == []


async def test_cancelling_the_caller_kills_the_run() -> None:
    token = f"dagnet-cancelled-{uuid.uuid4().hex}"
    code = f"import time\ntime.sleep(600)  # {token}\n"
    job = asyncio.ensure_future(run_python_async({}, ["-c", code], limits=_NEVER_ON_ITS_OWN))
    while not _processes_with(token) and not job.done():  # poll until it really runs
        await asyncio.sleep(0.01)
    assert not job.done()
    job.cancel()
    await _cancelled(job)
    assert _processes_with(token) == []


_NEVER_ON_ITS_OWN = SandboxLimits(wall_seconds=600)
"""A wall limit no test waits for: a cancellation that does not kill the run hangs visibly."""
_CANCEL_BOUND_S = 60.0
"""Far above the time a cancelled run takes to be killed, far below the wall limit."""


async def _cancelled(job: asyncio.Future[object]) -> None:
    """``job`` (already cancelled) ends cancelled, within the bound, not at the wall limit."""
    try:
        await asyncio.wait_for(job, _CANCEL_BOUND_S)
    except asyncio.CancelledError:
        return
    except TimeoutError:
        pytest.fail(f"the cancelled run was still waiting after {_CANCEL_BOUND_S:g}s")
    pytest.fail("the cancelled run completed")


def _processes() -> list[tuple[int, str, str, int, int, int]]:
    """(pid, name, state, parent, group, session) of every process on the host."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            state, parent, group, session = stat[stat.rindex(")") + 2 :].split()[:4]
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            found.append((int(entry.name), name, state, int(parent), int(group), int(session)))
    return found


def _our_children() -> list[tuple[int, str]]:
    """(pid, name) of every process whose parent is this one."""
    return [(pid, name) for pid, name, _, parent, *_ in _processes() if parent == os.getpid()]


def _left_running(before: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """This process's children that were not ``before`` and are still running.

    A test that ran a neuron's command in this process made it a subreaper
    (:func:`sandbox.lifetime.reap_adopted`), as a validator is: then bubblewrap's namespace
    init, killed with its run, comes back here as an orphan and the reaper thread collects it
    on its next turn. Such an adoptee (a session neither ours nor its own, as
    ``sandbox.lifetime`` tells them) counts only if it has not exited within the bound: its
    pidfd is waited on, not a reaper's turn. A child this process started counts as long as it
    is there at all: asyncio reaps those before a run returns."""
    ours = os.getsid(0)
    left = []
    for pid, name, _, parent, _, session in _processes():
        if parent != os.getpid() or (pid, name) in before:
            continue
        if session in (ours, pid) or not _exits(pid):
            left.append((pid, name))
    return left


def _exits(pid: int) -> bool:
    """Whether process ``pid`` has exited, or does within :data:`_CANCEL_BOUND_S`."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([handle], [], [], _CANCEL_BOUND_S)
        return bool(readable)
    finally:
        os.close(handle)


def _in_group(pgid: int) -> list[int]:
    """Live processes of the group (a zombie left to init to reap runs nothing)."""
    return [pid for pid, _, state, _, group, _ in _processes() if group == pgid and state != "Z"]


@pytest.mark.parametrize("iterations", range(40))
async def test_a_cancellation_at_any_point_of_the_start_leaves_nothing_running(iterations: int) -> None:
    """Cancelled after 0, 1, 2... turns of the event loop: the start's every await point."""
    token = f"dagnet-cancelled-{uuid.uuid4().hex}"
    before = _our_children()
    job = asyncio.ensure_future(
        run_python_async({}, ["-c", f"import time\ntime.sleep(600)  # {token}\n"], limits=_NEVER_ON_ITS_OWN)
    )
    for _ in range(iterations):
        await asyncio.sleep(0)
    job.cancel()
    await _cancelled(job)
    assert _processes_with(token) == []
    assert _left_running(before) == []


async def test_a_run_cancelled_before_its_start_returns_leaves_nothing_running(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process exists, the start has not yet handed it back, the caller is cancelled."""
    token = f"dagnet-cancelled-{uuid.uuid4().hex}"
    real_start = asyncio.create_subprocess_exec
    started: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    gate = asyncio.Event()

    async def slow_start(*args: object, **kwargs: object) -> asyncio.subprocess.Process:
        proc = await real_start(*args, **kwargs)
        started.set_result(proc.pid)
        await gate.wait()  # the caller is cancelled here
        return proc

    monkeypatch.setattr(asyncio, "create_subprocess_exec", slow_start)
    job = asyncio.ensure_future(
        run_python_async({}, ["-c", f"import time\ntime.sleep(600)  # {token}\n"], limits=_NEVER_ON_ITS_OWN)
    )
    pgid = await started
    while not _processes_with(token):  # the program itself runs
        await asyncio.sleep(0.01)
    job.cancel()
    await asyncio.sleep(0)
    gate.set()
    await _cancelled(job)
    assert _processes_with(token) == []
    assert _in_group(pgid) == []
    assert pgid not in [pid for pid, _ in _our_children()]


def test_fork_bomb_hits_the_process_limit(isolation: str) -> None:
    token = f"dagnet-bomb-{uuid.uuid4().hex}"
    code = f"import os\nwhile True:\n    os.fork()  # {token}\n"
    result = run_python({}, ["-c", code], limits=SMALL)
    assert result.timed_out or result.returncode != 0
    assert "BlockingIOError" in result.stderr or result.timed_out
    assert _processes_with(token) == []


def test_memory_hog_gets_memory_error(isolation: str) -> None:
    result = run_python({}, ["-c", "block = bytearray(1024 * 2**20)"], limits=SMALL)
    assert result.returncode != 0
    assert "MemoryError" in result.stderr


def test_write_to_repo_fails_and_leaves_no_file(isolation: str) -> None:
    target = REPO / f"pwned-{uuid.uuid4().hex}"
    result = run_python({}, ["-c", f"open({str(target)!r}, 'w').write('pwned')"])
    assert result.returncode != 0
    assert not target.exists()


def test_existing_host_file_cannot_be_changed(isolation: str, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("original")
    victim.chmod(0o666)
    result = run_python({}, ["-c", f"open({str(victim)!r}, 'a').write('pwned')"])
    assert result.returncode != 0
    assert victim.read_text() == "original"


def test_write_to_host_tmp_does_not_reach_the_host(isolation: str) -> None:
    if isolation != "bwrap":
        pytest.skip("fallbacks do not protect world-writable directories (docs/sandbox.md)")
    target = Path("/tmp") / f"x-{uuid.uuid4().hex}"
    result = run_python({}, ["-c", f"open({str(target)!r}, 'w').write('pwned')"])
    assert result.returncode == 0  # it wrote to its private /tmp
    assert not target.exists()


def _validator_paths(tmp_path: Path) -> dict[str, Path]:
    state = tmp_path / "state"
    state.mkdir()
    (state / "secret").write_text("hunter2")
    import scoring

    return {
        "repo": REPO / "scoring" / "weights.py",
        "installed package": Path(scoring.__file__),
        "task generators": REPO / "tasks" / "code_families.py",
        "work tree root": REPO.parent,
        "home": Path.home(),
        "virtualenv": Path(sys.prefix),
        "validator state": state / "secret",
    }


def test_the_validator_is_invisible_inside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if sandbox.isolation_available() != "bwrap":
        pytest.skip("only bubblewrap hides the host's files (docs/sandbox.md)")
    monkeypatch.setenv("DAGNET_VALIDATOR_SECRET", "hunter2")
    paths = _validator_paths(tmp_path)
    assert [name for name, path in paths.items() if not path.exists()] == []  # a missing file proves nothing
    code = (
        "import json, os, sys\n"
        "seen = {}\n"
        "for name, path in json.loads(sys.argv[1]).items():\n"
        "    try:\n"
        "        seen[name] = os.listdir(path) if os.path.isdir(path) else open(path).read()\n"
        "    except OSError as exc:\n"
        "        seen[name] = None\n"
        "for module in ('scoring', 'protocol', 'sandbox', 'bittensor', 'pydantic'):\n"
        "    try:\n"
        "        __import__(module)\n"
        "        seen['import ' + module] = True\n"
        "    except ImportError:\n"
        "        seen['import ' + module] = None\n"
        "seen['environ'] = 'hunter2' in repr(os.environ)\n"
        "print(json.dumps(seen))\n"
    )
    result = run_python({"main.py": code}, ["main.py", json.dumps({k: str(v) for k, v in paths.items()})])
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    # a checkout under /tmp makes "work tree root" the sandbox's own private /tmp: only its
    # own work and stage-in dirs may be there
    private_tmp = {Path(bwrap.WORKDIR).name, Path(bwrap.STAGE_IN).name}
    if paths["work tree root"] == Path("/tmp") and set(seen["work tree root"] or ()) <= private_tmp:
        seen["work tree root"] = None
    leaked = {name: value for name, value in seen.items() if value not in (None, False, [])}
    # a home may hold the interpreter itself (pyenv): the path to it, nothing else
    interpreter = Path(sandbox_interpreter.interpreter())
    on_the_way = {part for part in interpreter.parts}
    if "home" in leaked and set(leaked["home"]) <= on_the_way and paths["home"] in interpreter.parents:
        del leaked["home"]
    assert leaked == {}


def test_network_connection_never_arrives(isolation: str) -> None:
    if "netns" not in isolation and isolation != "bwrap":
        pytest.skip("this fallback has no network namespace (docs/sandbox.md)")
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'hi')\n"
        result = run_python({}, ["-c", code], limits=SMALL)
        readable, _, _ = select.select([server], [], [], 0)
    assert result.returncode != 0
    assert readable == []
