"""Imports flow one way (docs/architecture.md): a layer never imports one above it."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OURS = {"protocol", "sandbox", "storage", "chain", "scoring", "engine", "validator", "miner", "neurons", "benchmarks"}
ALLOWED = {
    "protocol": set(),
    "sandbox": {"protocol"},
    "storage": set(),
    "benchmarks": {"protocol"},
    "chain": {"protocol", "storage"},
    "scoring": {"protocol", "sandbox"},
    "engine": {"protocol", "scoring", "sandbox"},
    "validator": {"protocol", "scoring", "sandbox", "storage", "chain", "engine"},
    "miner": {"protocol", "sandbox", "storage"},
    "neurons": OURS,
}
BESIDES = {"miner/planner/attackers.py": {"benchmarks"}}
"""Files that may import more than their layer: the precompute attacker reads the public
task families, as any cheater can."""


def _imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found & OURS


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_the_layers_below_it(package):
    offenders = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        relative = str(path.relative_to(ROOT))
        bad = _imported_packages(path) - ALLOWED[package] - BESIDES.get(relative, set()) - {package}
        if bad:
            offenders[relative] = sorted(bad)
    assert offenders == {}


MAX_ENGINE_MODULE_LINES = 500


def test_no_engine_module_is_over_500_lines():
    sizes = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines()) for p in (ROOT / "engine").rglob("*.py")}
    assert sizes, "engine/ holds no modules"
    assert {path: n for path, n in sizes.items() if n > MAX_ENGINE_MODULE_LINES} == {}


def test_protocol_does_no_io():
    forbidden = {"httpx", "aiohttp", "fastapi", "uvicorn", "sqlite3", "subprocess", "socket", "bittensor"}
    for path in (ROOT / "protocol").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and n.level == 0}
        assert not names & forbidden, f"{path.name} imports {names & forbidden}"
