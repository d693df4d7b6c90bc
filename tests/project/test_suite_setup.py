"""How README's test command spreads the suite (tests/conftest.py): two workers a core (at
most a few beyond the cores) when the process-level tests run (they mostly wait), one a core
for ``-m "not e2e"`` (CPU-bound), and group timings kept only from runs of the whole suite."""

from __future__ import annotations

import os
from types import SimpleNamespace

import conftest  # tests/conftest.py: tests/ is on the path, as pytest loads it
import pytest


def _config(
    markexpr: str = "", keyword: str = "", source=pytest.Config.ArgsSource.TESTPATHS, **options: bool
) -> SimpleNamespace:
    return SimpleNamespace(option=SimpleNamespace(markexpr=markexpr, keyword=keyword, **options), args_source=source)


def test_auto_starts_two_workers_a_core_with_e2e_and_one_without(monkeypatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    cores = len(os.sched_getaffinity(0))
    with_e2e = cores + min(cores, conftest.WAITING_WORKERS)
    assert conftest.pytest_xdist_auto_num_workers(_config()) == with_e2e
    assert conftest.pytest_xdist_auto_num_workers(_config("e2e")) == with_e2e
    assert conftest.pytest_xdist_auto_num_workers(_config("not e2e")) == cores


def test_a_large_machine_gets_at_most_waiting_workers_beyond_its_cores(monkeypatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(32)))
    assert conftest.pytest_xdist_auto_num_workers(_config()) == 32 + conftest.WAITING_WORKERS
    assert conftest.pytest_xdist_auto_num_workers(_config("not e2e")) == 32


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
