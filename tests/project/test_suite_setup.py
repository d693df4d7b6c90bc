"""How README's test command spreads the suite (tests/conftest.py): two workers a core (at
most a few beyond the cores) when the process-level tests run (they mostly wait), one a core
and one more for ``-m "not e2e"`` (mostly CPU-bound), group timings kept only from runs of
the whole suite, the searches at full size unless the run is the quick loop
(tests/support/scale.py), and the quick loop importing no module of e2e tests only."""

from __future__ import annotations

import ast
import os
from pathlib import Path
from types import SimpleNamespace

import conftest  # tests/conftest.py: tests/ is on the path, as pytest loads it
import pytest

from support import scale
from tasks import load_families


def _config(
    markexpr: str = "", keyword: str = "", source=pytest.Config.ArgsSource.TESTPATHS, **options: bool
) -> SimpleNamespace:
    return SimpleNamespace(option=SimpleNamespace(markexpr=markexpr, keyword=keyword, **options), args_source=source)


def test_auto_starts_two_workers_a_core_with_e2e_and_one_a_core_and_one_without(monkeypatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    cores = len(os.sched_getaffinity(0))
    with_e2e = cores + min(cores, conftest.WAITING_WORKERS)
    assert conftest.pytest_xdist_auto_num_workers(_config()) == with_e2e
    assert conftest.pytest_xdist_auto_num_workers(_config("e2e")) == with_e2e
    assert conftest.pytest_xdist_auto_num_workers(_config("not e2e")) == cores + conftest.QUICK_SPARE_WORKERS


def test_a_large_machine_gets_at_most_waiting_workers_beyond_its_cores(monkeypatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(32)))
    assert conftest.pytest_xdist_auto_num_workers(_config()) == 32 + conftest.WAITING_WORKERS
    assert conftest.pytest_xdist_auto_num_workers(_config("not e2e")) == 32 + conftest.QUICK_SPARE_WORKERS


def test_the_environment_variable_still_sets_the_number(monkeypatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "3")
    assert conftest.pytest_xdist_auto_num_workers(_config()) is None  # pytest-xdist's own hook reads it


def test_only_a_run_of_every_test_records_group_timings() -> None:
    assert conftest._whole_suite(_config())
    assert not conftest._whole_suite(_config("not e2e"))
    assert not conftest._whole_suite(_config(keyword="localnet"))
    assert not conftest._whole_suite(_config(source=pytest.Config.ArgsSource.ARGS))
    assert not conftest._whole_suite(_config(lf=True))
    assert not conftest._whole_suite(_config(stepwise=True))
    assert conftest._whole_suite(_config(lf=False, stepwise=False))


@pytest.fixture
def this_runs_scale(monkeypatch):
    """The size this run configured, set again after a test that changes it."""
    was = scale.quick()
    yield
    monkeypatch.delenv(scale.ENV, raising=False)
    scale.configure("not e2e" if was else "")


def test_the_quick_loop_runs_a_quarter_of_each_search_and_the_whole_suite_all(this_runs_scale, monkeypatch) -> None:
    monkeypatch.delenv(scale.ENV, raising=False)
    families = load_families()
    scale.configure("not e2e")
    assert scale.quick() and scale.examples(300) == 75 and scale.examples(3) == 1
    assert len(scale.cases(families)) == 10 and scale.cases([(1, 0), (7, 3)]) == [(1, 0)]
    assert {f.task_type for f in scale.cases(families)} == {f.task_type for f in families}  # every type kept
    for markexpr in ("", "e2e", None):
        scale.configure(markexpr)
        assert not scale.quick() and scale.examples(300) == 300 and scale.cases(families) == list(families)


def test_the_environment_sets_the_size_outright_or_is_refused(this_runs_scale, monkeypatch) -> None:
    monkeypatch.setenv(scale.ENV, "full")
    scale.configure("not e2e")
    assert not scale.quick()
    monkeypatch.setenv(scale.ENV, "Quick")
    scale.configure("")
    assert scale.quick()
    monkeypatch.setenv(scale.ENV, "half")
    with pytest.raises(ValueError, match="DAGNET_TEST_SCALE must be 'full' or 'quick', not 'half'"):
        scale.configure("")


TESTS = Path(conftest.__file__).parent


def _module_mark(path: Path) -> str | None:
    """The module's top-level ``pytestmark = pytest.mark.X`` (X), read by the parser."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["pytestmark"]:
            return ast.unparse(node.value).removeprefix("pytest.mark.")
    return None


def test_the_quick_loop_skips_importing_exactly_the_modules_of_e2e_tests_only() -> None:
    """A module the one-line check takes for e2e-only marks every test e2e at its top level
    (not in a docstring or a string); the check answers only ``-m "not e2e"``."""
    modules = sorted(TESTS.rglob("test_*.py"))
    skipped = [path for path in modules if conftest.pytest_ignore_collect(path, _config("not  e2e "))]
    assert skipped and skipped == [path for path in modules if _module_mark(path) == "e2e"]
    for markexpr in ("", "e2e", "not e2e and not slow", "not e2e or slow"):
        assert not any(conftest.pytest_ignore_collect(path, _config(markexpr)) for path in skipped), markexpr
