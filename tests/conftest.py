"""Shared pytest fixtures. Each helper's fixtures carry its area's prefix (``miner_``...)."""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

# Scratch goes to the temp directory: every dagnet process the tests start (and every test)
# keeps its default files (a miner's feedback, the default embedded chain) under this
# DAGNET_HOME, removed when the session ends, never under the user's ~/.dagnet.
os.environ["DAGNET_HOME"] = tempfile.mkdtemp(prefix="dagnet-test-home-")


def _exit_unfinalized() -> None:
    """An xdist worker whose session ended leaves without the interpreter's teardown.

    By now its results are sent, its threads joined and every exit handler registered after
    this one has run (atexit runs them last registered first: DAGNET_HOME's removal, the
    sandbox's reaper, multiprocessing's children); what is left is the interpreter freeing the
    worker's heap object by object (py-spy: 2.6 s with no Python frame left), which the run's
    controller waits for before it reports. multiprocessing's children leave the same way (``os._exit``).
    A worker whose session did not end (it crashed) exits as Python does."""
    if not _SESSION_ENDED:
        return
    logging.shutdown()  # the one handler registered before this one that writes anything
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


_SESSION_ENDED: list[bool] = []
if os.environ.get("PYTEST_XDIST_WORKER"):
    atexit.register(_exit_unfinalized)
atexit.register(shutil.rmtree, os.environ["DAGNET_HOME"], ignore_errors=True)

# The suite keeps the bytecode it compiles (in the __pycache__ folders git ignores) even
# where PYTHONDONTWRITEBYTECODE is set: else every xdist worker compiles each module and
# rewrites each test module's assertions afresh at collection, 11.5 s of CPU a worker on a
# 2-core machine against 4.3 s with the bytecode kept (README, "Quick start").
sys.dont_write_bytecode = False

# The imports below come after DAGNET_HOME is set: the modules they load read it at import.
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from support import scale  # noqa: E402
from support.docker import docker_engine  # noqa: E402, F401  (a session fixture: stops the engine it started)
from support.prometheus import prometheus  # noqa: E402, F401  (a fixture, offered to every test)

if TYPE_CHECKING:
    from support.miner import MinerUnderTest


@pytest.fixture
async def miner_server() -> AsyncIterator[MinerUnderTest]:
    """A miner (//Bob) on a loopback port; validator //Alice is registered with stake."""
    from support.miner import running_miner  # the miner's app and the SDK: not for the run's controller

    async with running_miner() as miner:
        yield miner


WAITING_WORKERS = 4
"""At most this many workers beyond one a core in a run that includes the process-level tests."""
QUICK_SPARE_WORKERS = 1
"""Workers beyond one a core in the quick loop (``-m "not e2e"``): its tests still wait on
the servers, sandboxes and subprocesses they start (a core was idle 18 % of the time with
one a core); one more worker fills that, and more only add CPU."""


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """How many workers ``-n auto`` starts: one a core and :data:`QUICK_SPARE_WORKERS` for a
    run of ``-m "not e2e"``, whose tests mostly keep a core busy; for a run that includes the
    ``e2e`` tests, which spend most of their time waiting on the processes, deadlines and
    block clocks they drive, two a core with at most :data:`WAITING_WORKERS` beyond the cores
    (each worker holds its own imports and the processes its tests start; README, "Quick
    start"). ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still sets the number outright (pytest-xdist's
    own hook reads it: ``None`` defers to it)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = len(os.sched_getaffinity(0)) or 1
    if scale.leaves_out_e2e(config.option.markexpr):
        return cores + QUICK_SPARE_WORKERS
    return cores + min(cores, WAITING_WORKERS)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """README's test command runs the suite on pytest-xdist's workers with ``--dist loadgroup``:
    each module's tests go to one worker, so what a module fixture builds (the attack sweeps,
    the drawn shapes, a venv) is built once, and the tests that bind the host ports a page
    names (group ``host-ports``) run one at a time. Groups holding process-level (``e2e``)
    tests, the long ones, are handed out first, so the short ones fill in behind them rather
    than a localnet starting last (``--no-loadscope-reorder`` in addopts: else xdist hands
    out the groups with the most tests first, and the e2e groups, a test or two each, came
    last; a run without ``-n`` keeps this order too; the groups do nothing there). Behind
    them the other groups go longest first, by what each took in the last run that ran it
    (:class:`_GroupSeconds`; a group never timed keeps its place among those of 0 s), so a
    worker does not pick up a 20-second module while the other has finished."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    long_groups = {_group(item) for item in items if item.get_closest_marker("e2e")}
    seconds = _GroupSeconds.last(config)
    items.sort(key=lambda item: (_group(item) not in long_groups, -seconds.get(_group(item), 0.0)))


def _group(item: pytest.Item) -> str:
    return item.get_closest_marker("xdist_group").args[0]


class _GroupSuffix:
    """pytest-xdist's ``--dist loadgroup`` tells its scheduler a test's group by writing
    ``@group`` onto the test's ``_nodeid``; from pytest 9.2 a node's id lives in ``_id`` (a
    structured ``NodeId``), the write is lost, and every test is handed out on its own
    (pytest-xdist issue 1386): a module fixture is built on each worker that runs one of the
    module's tests, and the ``host-ports`` tests run side by side. Run after xdist's own hook,
    this writes the suffix where pytest reads it, as the open fix upstream (pull 1388) does,
    only on a test that does not have it already."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if not getattr(config.option, "loadgroup", False):  # set on xdist's workers under --dist loadgroup
            return
        for item in items:
            suffix = "@" + "_".join(sorted({str(m.args[0]) for m in item.iter_markers("xdist_group")}))
            if item.nodeid.endswith(suffix) or not hasattr(item, "_id"):
                continue
            from _pytest.nodeid import NodeId  # pytest >= 9.2, where `_id` exists

            item._id = NodeId.parse(item.nodeid + suffix)


class _GroupSeconds:
    """What each xdist group's tests took (setup, call and teardown) in the last run of the
    whole suite, kept in pytest's cache (``.pytest_cache``, key :attr:`KEY`) for the next
    run's order. Only the controller of an ``-n`` run records (a report's node id ends in
    ``@group`` there), and only a run of every test (:func:`_whole_suite`): a group's e2e
    tests are most of its time, and a ``-m "not e2e"`` run that wrote its other tests' few
    seconds over them put the judging-deadline steps (6 minutes) among the 1-second groups.
    A fresh clone has no cache: its groups keep collection order behind the e2e ones."""

    KEY = "dagnet/group-seconds"

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @staticmethod
    def last(config: pytest.Config) -> dict[str, float]:
        cache = getattr(config, "cache", None)  # None under -p no:cacheprovider
        found = cache.get(_GroupSeconds.KEY, {}) if cache is not None else {}
        return found if isinstance(found, dict) else {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        group = report.nodeid.rpartition("@")[2] if "@" in report.nodeid else None
        if group is not None:
            self.seconds[group] = self.seconds.get(group, 0.0) + report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        cache = getattr(session.config, "cache", None)
        if self.seconds and cache is not None:
            merged = _GroupSeconds.last(session.config) | {g: round(s, 2) for g, s in self.seconds.items()}
            cache.set(_GroupSeconds.KEY, merged)


def pytest_configure(config: pytest.Config) -> None:
    try:
        scale.configure(config.option.markexpr)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    # The machine is shared: a property test judged by wall time (hypothesis's 200 ms
    # deadline, its too-slow health check) fails on load, not on a counterexample. A test's
    # own @settings sets its number of examples through support.scale.examples.
    settings.register_profile(
        "dagnet",
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        max_examples=scale.examples(settings.get_profile("default").max_examples),
    )
    settings.load_profile("dagnet")
    config.pluginmanager.register(_GroupSuffix(), "dagnet-xdist-group-suffix")
    if not hasattr(config, "workerinput") and _whole_suite(config):  # the controller, or a run without -n
        config.pluginmanager.register(_GroupSeconds(), "dagnet-group-seconds")


def _whole_suite(config: pytest.Config) -> bool:
    """Whether this run selects every test: the configured test paths, no ``-m``, ``-k``,
    ``--lf`` or ``--sw`` (each leaves tests out)."""
    option = config.option
    return (
        config.args_source == pytest.Config.ArgsSource.TESTPATHS
        and not option.markexpr
        and not option.keyword
        and not getattr(option, "lf", False)
        and not getattr(option, "stepwise", False)
    )


E2E_MODULE = re.compile(r"^pytestmark = pytest\.mark\.e2e\b", re.MULTILINE)
"""A test module whose every test is ``e2e``: it says so in one line at the top level."""


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """In a run of ``-m "not e2e"`` exactly, a module of ``e2e`` tests only is not imported:
    its tests would all be deselected, and importing it and what it needs (chain nodes,
    compose files, localnets) cost each worker a second of CPU. Any other expression
    collects it as pytest does."""
    if collection_path.suffix != ".py" or not scale.selects_no_e2e(config.option.markexpr):
        return None
    try:
        text = collection_path.read_text(encoding="utf-8")
    except OSError:
        return None
    return True if E2E_MODULE.search(text) else None


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """The session has ended and reported: a worker may now leave unfinalized (:func:`_exit_unfinalized`)."""
    _SESSION_ENDED.append(True)
