"""The repository documents itself: no pointers outside it, no dead links inside it."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_SKIP_DIRS = {".git", ".venv", ".ci", "__pycache__", ".pytest_cache", ".mypy_cache", ".hypothesis", "build"}
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


_OUR_PACKAGES = "bench|chain|engine|miner|neurons|protocol|sandbox|scoring|storage|subnets|tasks|validator"
_DOTTED = re.compile(rf"`((?:{_OUR_PACKAGES})(?:\.[A-Za-z_]\w*)+)")


def _resolves(dotted: str) -> bool:
    """Whether ``dotted`` names a module of ours, or an attribute reached from the longest
    module prefix that imports."""
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


@pytest.mark.parametrize("page", sorted(ROOT.glob("*.md")) + sorted((ROOT / "docs").glob("*.md")), ids=lambda p: p.name)
def test_every_dotted_name_in_the_docs_exists(page: Path) -> None:
    """A function or module the docs name (`tasks.drawn.solves`) is where they say: the
    house moves, the docs follow."""
    names = sorted(set(_DOTTED.findall(page.read_text(encoding="utf-8"))))
    assert [name for name in names if not _resolves(name)] == []
