"""The repository documents itself: no pointers outside it, no dead links inside it."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_SKIP_DIRS = {".git", ".venv", ".ci", "__pycache__", ".pytest_cache", ".hypothesis", "build"}
_TEXT_SUFFIXES = {".py", ".md", ".json", ".toml", ".yml", ".yaml", ".txt", ".cfg", ".ini", ""}
# Spelled in pieces so this file does not match itself.
_OUTSIDE = ("../" + "shared", "SPEC" + " §", "SPEC" + ".md")
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _repo_files() -> list[Path]:
    return [
        path
        for path in ROOT.rglob("*")
        if path.is_file()
        and not _SKIP_DIRS.intersection(path.relative_to(ROOT).parts)
        and not any(part.endswith(".egg-info") for part in path.parts)
        and path.suffix in _TEXT_SUFFIXES
    ]


def test_no_file_points_outside_the_repository() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: {needle}"
        for path in _repo_files()
        for needle in _OUTSIDE
        if needle in path.read_text(encoding="utf-8", errors="replace")
    ]
    assert offenders == []


@pytest.mark.parametrize("page", sorted(ROOT.glob("*.md")) + sorted((ROOT / "docs").glob("*.md")), ids=lambda p: p.name)
def test_relative_links_resolve(page: Path) -> None:
    targets = [t for t in _LINK.findall(page.read_text(encoding="utf-8")) if "://" not in t]
    assert [t for t in targets if not (page.parent / t).exists()] == []
