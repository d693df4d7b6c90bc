"""One call of the solution, in its own interpreter; started by ``_harness.py``.

Passed with ``-c``, standard library only. Stdin is ``{"entry_point", "args", "kwargs"}``,
read whole before the solution is loaded. Stdout is kept on a private descriptor and
fd 1 pointed at stderr, so the solution's prints land on stderr; on the kept descriptor
goes one line, ``{"value": <JSON>}`` or ``{"error": "<exception type>"}``. The solution
can rewrite any of this: all it can forge is the answer to its own call.
"""

import json
import os
import sys
import types


def _load(entry_point):
    module = types.ModuleType("solution")
    module.__file__ = os.path.abspath("solution.py")
    sys.modules["solution"] = module
    with open("solution.py", encoding="utf-8") as handle:
        source = handle.read()
    exec(compile(source, "solution.py", "exec"), module.__dict__)
    return getattr(module, entry_point)


def main():
    call = json.loads(sys.stdin.read())
    answer = os.dup(1)
    os.dup2(2, 1)
    try:
        value = _load(call["entry_point"])(*call["args"], **call["kwargs"])
        line = '{"value":%s}' % json.dumps(value, allow_nan=False, separators=(",", ":"))
    except BaseException as exc:  # noqa: BLE001 - SystemExit and all: the call failed
        line = json.dumps({"error": type(exc).__name__})
    data = (line + "\n").encode()
    while data:
        data = data[os.write(answer, data) :]


main()
