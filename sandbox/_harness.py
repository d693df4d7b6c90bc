"""Runs inside the sandbox and calls the solution's function, one fresh interpreter per call.

Passed with ``-c``, standard library only. Stdin is ``{"token", "callee", "entry_point",
"calls": [[args, kwargs], ...], "cpu_seconds", "cpu_budget", "wall_factor",
"max_value_bytes", "exhausted"}``. This process never loads the solution: each call runs
``callee`` (``_callee.py``) in a child that has neither this process's stdout nor its
token, and that cannot read this process's memory or descriptors (not dumpable). The
child's one-line answer is checked, bounded in size, and written here as
``<token> {"call": i, "cpu": s, "value": <JSON>}`` or ``<token> {"call": i, "cpu": s,
"error": "<reason>"}``.

Time is CPU time, measured from outside the call: the CPU of every process the call
starts (this process is their subreaper, so nothing escapes by double-forking) is read
from ``/proc`` while it runs and from the reaped children's rusage once it is over. A
call may use ``cpu_seconds``; all calls together ``cpu_budget``; past it the remaining
calls are not run and fail with the ``exhausted`` reason. Wall time is only a safety net
for code that waits instead of computing: ``wall_factor × cpu_seconds`` per call. A call
caught by the net ends the judgement: its allowance was to compute, not to hold the caller.
"""

import ctypes
import json
import math
import os
import resource
import select
import signal
import subprocess
import sys
import time

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.02
REAP_S = 2.0
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
CPU_LIMIT = "cpu time limit"
WALL_NET = "waited past the wall-clock net"
TOO_LARGE = "answer too large"


def _prctl(option, value):
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # without it the token still keeps forged lines out; the wall net still ends calls


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _descendants():
    """``{pid: CPU seconds}`` of the live (or unreaped) processes below this one."""
    parents, cpu = {}, {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        pid = int(name)
        parents[pid] = int(fields[1])
        cpu[pid] = sum(int(value) for value in fields[11:15]) * TICK_S  # utime stime cutime cstime
    below, frontier = {}, [os.getpid()]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in below:
                below[pid] = cpu[pid]
                frontier.append(pid)
    return below


def _end_tree():
    """Kill every process below this one and reap them all (their CPU lands in RUSAGE_CHILDREN)."""
    deadline = time.monotonic() + REAP_S
    while time.monotonic() < deadline:
        for pid in _descendants():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return
        time.sleep(POLL_S)


def _answer(data):
    """The child's answer as a result record, or None when it is not exactly one answer line.

    A child reports an error by its exception's type name; anything else it writes there
    is no answer, so it cannot borrow the reasons this harness gives."""
    if not data.endswith(b"\n") or data.count(b"\n") != 1:
        return None
    try:
        answer = json.loads(data, parse_constant=_reject)
    except (ValueError, RecursionError):
        return None
    if not isinstance(answer, dict) or len(answer) != 1:
        return None
    if "value" in answer:
        return {"value": answer["value"]}
    error = answer.get("error")
    if isinstance(error, str) and error.isidentifier():
        return {"error": error[:100]}
    return None


def _reject(name):
    raise ValueError(name)


def _cpu_backstop(seconds):
    """The kernel's own per-process ceiling, should this process fall behind; never above the run's."""
    limit, hard = math.ceil(seconds) + 1, resource.getrlimit(resource.RLIMIT_CPU)[1]
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    return lambda: resource.setrlimit(resource.RLIMIT_CPU, (limit, limit))


class _Call:
    """One call: the child, what it wrote, and the CPU its processes have used."""

    def __init__(self, spec, args, kwargs, allowance):
        self.allowance = allowance
        self.base = _children_cpu()
        self.child = subprocess.Popen(
            [sys.executable, "-s", "-P", "-B", "-c", spec["callee"]],  # the sandbox's env: its hash seed
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_cpu_backstop(allowance),
        )
        request = json.dumps({"entry_point": spec["entry_point"], "args": args, "kwargs": kwargs})
        try:
            self.child.stdin.write(request.encode())
            self.child.stdin.close()
        except BrokenPipeError:
            pass

    def cpu(self):
        return _children_cpu() - self.base + sum(_descendants().values())

    def read(self, limit, wall_s):
        """``(data, error)``: what the child wrote before closing stdout, or why it was stopped."""
        fd, chunks, size = self.child.stdout.fileno(), [], 0
        deadline = time.monotonic() + wall_s
        while True:
            if self.cpu() > self.allowance:
                return None, CPU_LIMIT
            if time.monotonic() > deadline:
                return None, WALL_NET
            if not select.select([fd], [], [], POLL_S)[0]:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return b"".join(chunks), None
            size += len(chunk)
            if size > limit:
                return None, TOO_LARGE
            chunks.append(chunk)

    def end(self):
        """Kill what is left of the call; the CPU all of it used, exactly."""
        try:
            os.killpg(self.child.pid, signal.SIGKILL)
        except OSError:
            pass
        _end_tree()
        self.child.returncode = -1  # reaped above, with every other process of the call
        self.child.stdout.close()
        return _children_cpu() - self.base


def _judge(spec, args, kwargs, allowance):
    """``(record, cpu seconds used, whether the judgement must stop)``."""
    call = _Call(spec, args, kwargs, allowance)
    try:
        data, error = call.read(spec["max_value_bytes"] + 64, spec["wall_factor"] * spec["cpu_seconds"])
    finally:
        used = call.end()
    if error is None and used > allowance:
        error = CPU_LIMIT
    if error == CPU_LIMIT and allowance < spec["cpu_seconds"]:
        error = spec["exhausted"]
    if error is not None:
        return {"error": error}, used, error != CPU_LIMIT and error != TOO_LARGE
    return _answer(data) or {"error": "no answer"}, used, False


def main():
    spec = json.loads(sys.stdin.read())
    token = spec.pop("token")
    _prctl(PR_SET_DUMPABLE, 0)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    left, stopped = spec["cpu_budget"], False
    for index, (args, kwargs) in enumerate(spec["calls"]):
        allowance = min(spec["cpu_seconds"], left)
        if stopped or allowance <= 0:
            record, used = {"error": spec["exhausted"]}, 0.0
        else:
            record, used, stopped = _judge(spec, args, kwargs, allowance)
            left -= used
        record = {"call": index, "cpu": round(used, 6), **record}
        line = "%s %s\n" % (token, json.dumps(record, allow_nan=False, separators=(",", ":")))
        data = line.encode()
        while data:
            data = data[os.write(1, data) :]


main()
