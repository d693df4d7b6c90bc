"""Runs inside the sandbox and calls the solution's function, one fresh interpreter per call.

Passed with ``-c``, standard library only. Stdin is ``{"token", "callee", "entry_point",
"calls": [[args, kwargs], ...], "seconds", "max_value_bytes"}``. This process never loads
the solution: each call runs ``callee`` (``_callee.py``) in a child that has neither this
process's stdout nor its token, and that cannot read this process's memory or
descriptors (not dumpable). The child's one-line answer is checked, bounded in size and
time, and written here as ``<token> {"call": i, "value": <JSON>}`` or
``<token> {"call": i, "error": "<reason>"}``.
"""

import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import time

PR_SET_DUMPABLE = 4


def _not_dumpable():
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # without it the token still keeps forged lines out


def _read_bounded(fd, deadline, limit):
    """What the child writes before it closes stdout, or None past ``limit`` bytes or the deadline."""
    chunks, size = [], 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)


def _answer(data):
    """The child's answer as a result record, or None when it is not exactly one answer line."""
    if data is None or not data.endswith(b"\n") or data.count(b"\n") != 1:
        return None
    try:
        answer = json.loads(data, parse_constant=_reject)
    except (ValueError, RecursionError):
        return None
    if not isinstance(answer, dict) or len(answer) != 1:
        return None
    if "value" in answer:
        return {"value": answer["value"]}
    if isinstance(answer.get("error"), str):
        return {"error": answer["error"][:100]}
    return None


def _reject(name):
    raise ValueError(name)


def _call(spec, args, kwargs):
    child = subprocess.Popen(
        [sys.executable, "-I", "-B", "-c", spec["callee"]],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        request = json.dumps({"entry_point": spec["entry_point"], "args": args, "kwargs": kwargs})
        try:
            child.stdin.write(request.encode())
            child.stdin.close()
        except BrokenPipeError:
            pass
        deadline = time.monotonic() + spec["seconds"]
        data = _read_bounded(child.stdout.fileno(), deadline, spec["max_value_bytes"] + 64)
    finally:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except OSError:
            pass
        child.wait()
        child.stdout.close()
    if data is None:
        return {"error": "timed out or answer too large"}
    return _answer(data) or {"error": "no answer"}


def main():
    spec = json.loads(sys.stdin.read())
    token = spec.pop("token")
    _not_dumpable()
    for index, (args, kwargs) in enumerate(spec["calls"]):
        record = {"call": index, **_call(spec, args, kwargs)}
        line = "%s %s\n" % (token, json.dumps(record, allow_nan=False, separators=(",", ":")))
        data = line.encode()
        while data:
            data = data[os.write(1, data) :]


main()
