"""Docs as tests: find every fenced shell block of README.md, docs/*.md and the planner
template's README and run it.

A block is fenced with a language of ``bash``, ``sh`` or ``shell``. The HTML comment on
the line right above the fence (renderers hide it) says how it runs:

- no comment: every command line runs, in order, in one fresh folder; a line's trailing
  comment that says ``exit N`` is its expected exit status, every other line must exit 0;
- ``<!-- doc-test: serve URL -->``: the block starts a long-running process; it must
  answer ``URL`` (any HTTP status) before it exits, then it is stopped;
- ``<!-- doc-test: recipe NAME -->``: a recipe run whole by its own test (named in the
  page), which looks the block up by this marker;
- ``<!-- doc-test: skip REASON -->``: cannot run here, for the reason given (a Docker
  engine, the test suite itself);
- ``<!-- doc-test: continue -->`` or ``<!-- doc-test: continue serve URL -->``: the block
  goes on where the block above it on the page left off (a walk-through's next step): the
  commands of the blocks it continues run first, in the same folder (and, for a plain
  block, the same shell), and must succeed.

The fresh folder stands for a checkout: it holds a copy of ``examples/`` and its own
``.venv`` (a new virtual environment that sees the running interpreter's packages, as
``--system-site-packages`` would, with ``pip`` and ``dagnet`` in its ``bin``), ``HOME``
points inside it (wallets, caches, ``~/my-planner``), and that ``bin`` comes first on
``PATH``: commands run against the installed package exactly as a reader types them, and
what a block installs with ``pip`` stays in its folder.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
SHELLS = {"bash", "sh", "shell"}
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+-]*)")
_DIRECTIVE = re.compile(r"^\s*<!--\s*(doc-test|recipe):?\s*(.*?)\s*-->\s*$")
_EXIT = re.compile(r"#.*\bexit (\d+)\b")
LINE_TIMEOUT_S = 180.0
SERVE_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class Block:
    page: Path
    line: int
    """1-based line of the opening fence."""
    language: str
    text: str
    directive: str
    """``run`` (no comment), ``serve URL``, ``recipe NAME`` or ``skip REASON``, each
    perhaps after ``continue``."""

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def continues(self) -> bool:
        """Whether the block goes on from the block above it on its page."""
        return self.directive.split(" ", 1)[0] == _CONTINUE

    @property
    def kind(self) -> str:
        return self._own.split(" ", 1)[0]

    @property
    def argument(self) -> str:
        parts = self._own.split(" ", 1)
        return parts[1] if len(parts) > 1 else ""

    @property
    def _own(self) -> str:
        rest = self.directive.removeprefix(_CONTINUE).strip() if self.continues else self.directive
        return rest or "run"


_CONTINUE = "continue"


def pages() -> list[Path]:
    return [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        ROOT / "examples" / "planner-template" / "README.md",
    ]


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page`` (shell or not), with the directive above it."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found, index = [], 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        fence, language = opening.group(1), opening.group(2).lower()
        end = index + 1
        while end < len(lines) and not lines[end].lstrip().startswith(fence):
            end += 1
        found.append(Block(page, index + 1, language, "\n".join(lines[index + 1 : end]), _directive(lines, index)))
        index = end + 1
    return found


def shell_blocks() -> list[Block]:
    return [block for page in pages() for block in blocks(page) if block.language in SHELLS]


def before(block: Block) -> list[Block]:
    """The blocks ``block`` continues, first to last (none when it does not)."""
    if not block.continues:
        return []
    page = [b for b in blocks(block.page) if b.language in SHELLS]
    index = next(i for i, b in enumerate(page) if b.line == block.line)
    start = index
    while start > 0 and page[start].continues:
        start -= 1
    return page[start:index]


def _directive(lines: list[str], fence_index: int) -> str:
    above = lines[fence_index - 1] if fence_index > 0 else ""
    match = _DIRECTIVE.match(above)
    if not match:
        return "run"
    if match.group(1) == "recipe":
        return f"recipe {match.group(2)}"
    return match.group(2)


def commands(text: str) -> list[str]:
    """The block's command lines: continuations joined, comment-only and blank lines dropped."""
    joined: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = pending + (raw.lstrip() if pending else raw)
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1].rstrip() + " "
            continue
        pending = ""
        if line.strip() and not line.strip().startswith("#"):
            joined.append(line)
    return joined


def expected_exit(command: str) -> int:
    match = _EXIT.search(command)
    return int(match.group(1)) if match else 0


def workspace(tmp: Path) -> dict[str, str]:
    """Make ``tmp`` a reader's fresh folder; the environment its commands run in."""
    shutil.copytree(ROOT / "examples", tmp / "examples", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    venv = _venv(tmp / ".venv")
    home = tmp / "home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("BT_", "PYTHONPATH", "PYTEST_"))}
    path = os.pathsep.join([str(venv / "bin"), str(Path(sys.prefix) / "bin"), env.get("PATH", "")])
    env.update(HOME=str(home), PATH=path, COLUMNS="100")
    return env


def _venv(where: Path) -> Path:
    """A new virtual environment at ``where`` that sees the running one's packages (a
    ``.pth`` adds its site folder, whose own ``.pth`` files, dagnet's editable install
    among them, apply), with ``pip`` and ``dagnet`` run by its own interpreter."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    python = where / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    host = sysconfig.get_paths()["purelib"]
    (Path(site) / "dagnet-host.pth").write_text(f"import site; site.addsitedir({host!r})\n")
    for name, module in (("pip", "pip"), ("dagnet", "neurons")):
        command = where / "bin" / name
        command.write_text(f'#!/bin/sh\nexec "{python}" -m {module} "$@"\n')
        command.chmod(0o755)
    return where


def script(block: Block) -> str:
    """A bash script running each command of the blocks ``block`` continues, then its
    own, checking each one's exit status."""
    return _checked([c for b in before(block) for c in commands(b.text)] + commands(block.text))


def _checked(lines: list[str]) -> str:
    out = ["set -u"]
    for number, command in enumerate(lines, 1):
        expected = expected_exit(command)
        quoted = command.replace("'", "'\\''")
        out += [
            command,
            f'rc=$?; if [ "$rc" -ne {expected} ]; then '
            f"echo 'doc-test: command {number} exited '\"$rc\"', expected {expected}: {quoted}' >&2; exit 99; fi",
        ]
    return "\n".join(out) + "\n"


def run_block(block: Block, tmp: Path) -> subprocess.CompletedProcess[str]:
    """Run a plain block to completion in ``tmp``; the process, for its status and output.

    Whatever the block leaves running (a command that never ends, a ``&``) is stopped
    with its whole process group, timed out or not.
    """
    env = workspace(tmp)
    process = subprocess.Popen(
        ["bash", "-c", script(block)],
        cwd=tmp,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=LINE_TIMEOUT_S * max(1, script(block).count("\nrc=$?")))
    except subprocess.TimeoutExpired:
        _stop(process)
        out, err = process.communicate()
        err += "\ndoc-test: timed out: is this a long-running command? mark the block `doc-test: serve URL`"
    finally:
        _stop(process)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def serve_block(block: Block, tmp: Path) -> tuple[bool, str]:
    """Start a ``serve URL`` block (once the blocks it continues have run); whether ``URL``
    answered before the process exited."""
    env = workspace(tmp)
    log = tmp / "serve.log"
    with log.open("w") as sink:
        earlier = [c for b in before(block) for c in commands(b.text)]
        if earlier:
            done = subprocess.run(
                ["bash", "-c", _checked(earlier)],
                cwd=tmp,
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                timeout=LINE_TIMEOUT_S * len(earlier),
            )
            if done.returncode != 0:
                return False, log.read_text(errors="replace")
        process = subprocess.Popen(
            ["bash", "-c", block.text],
            cwd=tmp,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            answered = _wait_for(block.argument, process)
        finally:
            _stop(process)
    return answered, log.read_text(errors="replace")


def _wait_for(url: str, process: subprocess.Popen) -> bool:
    deadline = time.monotonic() + SERVE_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        try:
            httpx.get(url, timeout=2.0)
            return True
        except httpx.HTTPError:
            time.sleep(0.2)  # the server is still starting: poll again
    return False


def _stop(process: subprocess.Popen) -> None:
    """Stop ``process``'s whole group (it leads its own session), even after it exited."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
