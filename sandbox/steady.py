"""What a sandboxed program reads of the machine and the clock: the same on every run.

Under bubblewrap (:func:`steady_argv`): constant files are bound read-only over the
``/proc`` files that tell one boot, moment or machine from another (:data:`PROC_FILES`),
and ``sitecustomize`` (``sandbox/_sitecustomize.py``)
fixes the wall clock and the random seed in every interpreter before the program runs.
The interpreters also get ``PYTHONHASHSEED=0`` (:data:`ENV`): str hashes, hence set order,
are the same on every run. What is not covered is listed in docs/sandbox.md.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from functools import cache
from pathlib import Path

ENV = {"PYTHONHASHSEED": "0"}
PROC_FILES = {
    "/proc/sys/kernel/random/boot_id": "00000000-0000-4000-8000-000000000000\n",
    "/proc/uptime": "1000.00 1000.00\n",
    "/proc/loadavg": "0.00 0.00 0.00 1/1 1\n",
    "/proc/cpuinfo": "processor\t: 0\nvendor_id\t: dagnet\nmodel name\t: dagnet sandbox\n\n",
    "/proc/stat": "cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\nintr 0\nctxt 0\nbtime 1700000000\n"
    "processes 1\nprocs_running 1\nprocs_blocked 0\n",
    "/proc/meminfo": "MemTotal:        1048576 kB\nMemFree:         1048576 kB\nMemAvailable:    1048576 kB\n",
}
"""Each file's constant text (one CPU, 1 GiB, up 1,000 s, idle, booted at the sandbox's epoch)."""
SITECUSTOMIZE = "sitecustomize.py"


def steady_argv(package_dirs: list[str]) -> list[str]:
    """bwrap options binding the constant files, after ``--proc`` and the tmpfs over each of
    ``package_dirs`` (where ``sitecustomize`` is staged), before they are made read-only."""
    files = _files()
    argv: list[str] = []
    for target in PROC_FILES:
        argv += ["--ro-bind", str(files / target.lstrip("/").replace("/", "_")), target]
    for package_dir in package_dirs:
        argv += ["--ro-bind", str(files / SITECUSTOMIZE), os.path.join(package_dir, SITECUSTOMIZE)]
    return argv


@cache
def _files() -> Path:
    """The constant files, written once per process into a directory removed at exit."""
    root = Path(tempfile.mkdtemp(prefix="dagnet-sandbox-steady-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    root.chmod(0o755)
    texts = {target.lstrip("/").replace("/", "_"): text for target, text in PROC_FILES.items()}
    texts[SITECUSTOMIZE] = (Path(__file__).parent / "_sitecustomize.py").read_text(encoding="utf-8")
    for name, text in texts.items():
        (root / name).write_text(text, encoding="utf-8")
        (root / name).chmod(0o444)
    return root
