"""Every command README.md, docs/*.md and the planner template's README show runs as
written (tests/support/doccmds.py says how a block is marked and run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import doccmds

pytestmark = pytest.mark.e2e


BLOCKS = doccmds.shell_blocks()
KINDS = {"run", "serve", "recipe", "skip"}


def _of(kind: str) -> list[doccmds.Block]:
    return [block for block in BLOCKS if block.kind == kind]


def test_every_shell_block_is_marked_with_a_known_kind() -> None:
    unknown = [(block.id, block.directive) for block in BLOCKS if block.kind not in KINDS]
    assert unknown == []
    assert [block.id for block in _of("skip") if not block.argument] == []  # a skip says why
    assert len(BLOCKS) >= 10


def test_no_fence_hides_shell_commands_without_a_language() -> None:
    """An untagged fence whose first line starts with a command would escape these tests."""
    untagged = [
        block.id
        for page in doccmds.pages()
        for block in doccmds.blocks(page)
        if not block.language and block.text.lstrip().startswith(("dagnet ", ".venv/", "scripts/", "docker "))
    ]
    assert untagged == []


@pytest.mark.parametrize("block", _of("run"), ids=lambda b: b.id)
def test_block_runs_as_written(block: doccmds.Block, tmp_path: Path) -> None:
    done = doccmds.run_block(block, tmp_path)
    assert done.returncode == 0, f"{block.id}\n{done.stderr[-3000:]}\n{done.stdout[-1000:]}"


@pytest.mark.xdist_group("host-ports")  # every served block listens on the port its page names
@pytest.mark.parametrize("block", _of("serve"), ids=lambda b: b.id)
def test_server_block_serves(block: doccmds.Block, tmp_path: Path) -> None:
    answered, log = doccmds.serve_block(block, tmp_path)
    assert answered, f"{block.id}: {block.argument} never answered\n{log[-3000:]}"
    assert "Traceback" not in log, log[-3000:]


@pytest.mark.parametrize("block", _of("recipe"), ids=lambda b: b.id)
def test_recipe_has_its_own_test(block: doccmds.Block) -> None:
    marker = f"<!-- recipe: {block.argument} -->"
    owners = [
        path.name for path in Path(__file__).parents[1].rglob("test_*.py") if marker in path.read_text(encoding="utf-8")
    ]
    assert block.argument and owners, f"{block.id}: no test runs recipe {block.argument!r}"


def test_a_broken_command_fails(tmp_path: Path) -> None:
    """The runner is not a rubber stamp: a documented exit status that does not hold, and
    a command that does not exist, both fail the block."""
    page = doccmds.ROOT / "README.md"
    wrong_exit = doccmds.Block(page, 1, "bash", "dagnet plan check examples/cycle.json   # exit 0", "run")
    done = doccmds.run_block(wrong_exit, tmp_path / "a")
    assert done.returncode == 99 and "exited 2, expected 0" in done.stderr
    typo = doccmds.Block(page, 1, "bash", "dagnet plan chekc examples/cycle.json", "run")
    assert doccmds.run_block(typo, tmp_path / "b").returncode == 99


def test_commands_join_continuations_and_read_the_expected_exit() -> None:
    text = "# a comment\ndagnet miner --dev-key //Bob \\\n    --port 8091\n\ndagnet plan check x.json   # exit 2: cycle"
    assert doccmds.commands(text) == [
        "dagnet miner --dev-key //Bob --port 8091",
        "dagnet plan check x.json   # exit 2: cycle",
    ]
    assert [doccmds.expected_exit(c) for c in doccmds.commands(text)] == [0, 2]


WALKTHROUGHS = ("docs/mining.md", "examples/planner-template/README.md")
"""A miner's first steps: every block runs here, none is left to another test."""


@pytest.mark.parametrize("page", WALKTHROUGHS)
def test_a_miners_walkthrough_runs_block_by_block(page: str) -> None:
    shown = [block for block in BLOCKS if block.page == doccmds.ROOT / page]
    assert shown and {block.kind for block in shown} <= {"run", "serve", "skip"}, [(b.id, b.directive) for b in shown]
    assert any(block.continues for block in shown)  # the later steps go on from the install


def test_a_continued_block_goes_on_where_the_one_above_left_off(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```bash\necho hello > made.txt\ncd examples\n```\n\n<!-- doc-test: continue -->\n"
        "```bash\ntest -f metagraph.json && grep -q hello ../made.txt\n```\n\n"
        "<!-- doc-test: continue -->\n```bash\ntrue\n```\n"
    )
    first, second, third = doccmds.blocks(page)
    assert (second.continues, second.kind, third.kind) == (True, "run", "run") and doccmds.before(third) == [
        first,
        second,
    ]
    assert doccmds.run_block(second, tmp_path / "a").returncode == 0
    broken = doccmds.Block(page, 1, "bash", "false", "run")
    failing = doccmds.Block(page, second.line, "bash", second.text, second.directive)
    page.write_text(page.read_text().replace("cd examples", "cd nowhere"))
    assert doccmds.run_block(failing, tmp_path / "b").returncode == 99
    assert doccmds.run_block(broken, tmp_path / "c").returncode == 99


def test_what_a_block_installs_stays_in_its_folder(tmp_path: Path) -> None:
    """Each block has an environment of its own that sees dagnet's: `pip install` goes there."""
    block = doccmds.Block(
        doccmds.ROOT / "README.md",
        1,
        "bash",
        'python -c "import sys, neurons; print(sys.prefix)" > prefix.txt\ndagnet --help',
        "run",
    )
    assert doccmds.run_block(block, tmp_path).returncode == 0
    assert (tmp_path / "prefix.txt").read_text().strip() == str(tmp_path / ".venv")
