"""First code to run inside the sandbox, before the untrusted program.

Passed to the interpreter with ``-c`` (never imported), so it uses the standard
library only. ``argv[1]`` is a JSON config, the rest is the program's command line.
It applies the rlimits, drops root to the configured uid (RLIMIT_NPROC is not
enforced for root), stages the input files into a private work dir when asked, and
replaces itself with ``python -s -P -B <args>``. Exit status 126 means the sandbox
itself could not be set up; the program never ran.
"""

import json
import os
import resource
import shutil
import sys

SETUP_FAILED = 126
PYTHON_FLAGS = ["-s", "-P", "-B"]
"""``-I`` but for ``-E``: the environment is the sandbox's own, and its PYTHONHASHSEED counts."""


def _apply(config):
    for name, (soft, hard) in config["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    uid = config["uid"]
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    os.umask(0o077)
    stage = config["stage"]
    if stage is not None:
        source, target = stage
        shutil.copytree(source, target)
        os.chdir(target)


def main():
    try:
        _apply(json.loads(sys.argv[1]))
        os.execv(sys.executable, [sys.executable, *PYTHON_FLAGS, *sys.argv[2:]])
    except Exception as exc:
        sys.stderr.write(f"sandbox setup failed: {type(exc).__name__}: {exc}\n")
        sys.stderr.flush()
        os._exit(SETUP_FAILED)


main()
