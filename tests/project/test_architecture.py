"""Imports flow one way (docs/architecture.md): a layer never imports one above it."""

import ast
import graphlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = {
    "bench",
    "render",
    "planners",
    "protocol",
    "subnets",
    "sandbox",
    "storage",
    "chain",
    "scoring",
    "engine",
    "validator",
    "miner",
    "neurons",
    "tasks",
}
ALLOWED = {
    "protocol": set(),
    "sandbox": {"protocol"},
    "storage": set(),
    "subnets": {"protocol", "sandbox"},
    "tasks": {"protocol"},
    "chain": {"protocol", "storage"},
    "scoring": {"protocol", "sandbox"},
    "engine": {"protocol", "scoring", "sandbox"},
    "planners": {"protocol", "sandbox", "subnets"},
    "validator": {"protocol", "scoring", "sandbox", "storage", "chain", "engine", "subnets", "tasks", "planners"},
    "miner": {"protocol", "sandbox", "storage", "subnets", "planners"},
    "render": {"protocol", "scoring", "engine"},
    "neurons": OURS,
    "bench": OURS - {"neurons"},
}
BESIDES = {"planners/attackers.py": {"tasks"}}
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
    sizes = {
        str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
        for p in (ROOT / "engine").rglob("*.py")
    }
    assert sizes, "engine/ holds no modules"
    assert {path: n for path, n in sizes.items() if n > MAX_ENGINE_MODULE_LINES} == {}


def test_protocol_does_no_io():
    forbidden = {"httpx", "aiohttp", "fastapi", "uvicorn", "sqlite3", "subprocess", "socket", "bittensor"}
    for path in (ROOT / "protocol").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {
            n.module.split(".")[0]
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.module and n.level == 0
        }
        assert not names & forbidden, f"{path.name} imports {names & forbidden}"


ENTRY_OR_TYPES_ONLY = ('__name__ == "__main__"', "__name__ == '__main__'", "TYPE_CHECKING")
"""Blocks whose imports are no edge of the module graph: a ``__main__`` guard runs only
when the file is the program (``python -m neurons.miner`` is then a module of its own,
``__main__``, so ``neurons.cli`` importing ``neurons.miner`` again loads a fresh module
with the guard false: no import waits on itself), and ``TYPE_CHECKING`` never runs."""


def _modules() -> dict[str, Path]:
    found = {}
    for package in OURS:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(tree: ast.AST):
    """Every import statement, at module level or in a function, outside the blocks above."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ENTRY_OR_TYPES_ONLY:
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _imports(node)


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The dotted names ``node`` imports: for ``from m import x``, ``m.x`` (a submodule
    or a name in ``m``) — relative imports resolved against ``module``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        anchor = module.split(".")[: len(module.split(".")) - node.level + is_package]
        base = ".".join(anchor + ([node.module] if node.module else []))
    return [f"{base}.{alias.name}" for alias in node.names]


def _import_graph() -> dict[str, set[str]]:
    """Module → the modules of ours it imports (the longest known prefix of each name)."""
    modules = _modules()
    graph = {}
    for module, path in modules.items():
        deps = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            for name in _targets(node, module, path.name == "__init__.py"):
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name and name != module:
                    deps.add(name)
        graph[module] = deps
    return graph


def test_the_import_graph_has_no_cycle():
    try:
        tuple(graphlib.TopologicalSorter(_import_graph()).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"import cycle: {' -> '.join(exc.args[1])}")


def test_the_cycle_check_sees_function_level_imports():
    graph = _import_graph()
    assert "neurons.miner" in graph["neurons.commands.miner"]  # imported inside the command function
    assert "neurons.cli" not in graph["neurons.miner"]  # only under its __main__ guard


def test_the_workers_see_the_run_through_a_protocol_and_never_import_the_executor():
    import engine.workers
    from engine.executor import _Run
    from engine.workers import AttemptHost

    tree = ast.parse((ROOT / "engine" / "workers.py").read_text(encoding="utf-8"))
    imported = {
        name
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))  # TYPE_CHECKING too
        for name in _targets(node, "engine.workers", False)
    }
    assert not {name for name in imported if name.startswith("engine.executor")}
    assert all(not name.startswith("_") for name in engine.workers.__all__)
    members = {
        *AttemptHost.__annotations__,
        *(n for n, v in vars(AttemptHost).items() if callable(v) and not n.startswith("_")),
    }
    assert members >= {"clock", "t0", "task_id", "record", "settle", "frames"}
    assert {name for name in members if not hasattr(_Run, name)} == set()


MAX_VALIDATOR_MODULE_LINES = 400
"""No room of the validator is a 27 KB ``base/validator.py``: the loop, its step, its store
and its sources each read in one sitting."""


def test_no_validator_module_is_over_400_lines():
    sizes = {
        str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
        for p in (ROOT / "validator").rglob("*.py")
    }
    assert {path: n for path, n in sizes.items() if n > MAX_VALIDATOR_MODULE_LINES} == {}
