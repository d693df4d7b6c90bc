"""The plan builder under concurrency: each thread and each asyncio task builds only its own plan.

A miner plans every request in a thread of its own (``planners/base.py``), and
every planner writes its plan with the builder, so builds overlap whenever two
validators query at once.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from planners import load_planner
from protocol.builder import END, BuildError, graph, tool
from tasks import load_families

PACKAGES = [found.package for found in load_families()]
GOOD = load_planner("good")  # one planner for every thread and task, as a miner has one
ROUNDS = 4  # each family planned this many times by the threads and again by the tasks
THREADS = 8

upper = tool("text_transform", subnet="sn1", op="upper")


@pytest.fixture
def tiny_switch_interval():
    """Threads switch every 5 µs, so builds overlap inside the builder's own steps."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(5e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def _wire(package) -> dict:
    return GOOD.plan(package).plan.to_wire()


def _tally(serial: dict[str, dict], outcomes: list[tuple[str, dict | BaseException]]) -> dict[str, object]:
    wrong = sum(1 for task, got in outcomes if isinstance(got, dict) and got != serial[task])
    failed = [f"{task}: {got}" for task, got in outcomes if isinstance(got, BaseException)]
    return {"plans": len(outcomes), "wrong": wrong, "failed": len(failed), "first failure": failed[:1]}


def _attempt(package) -> tuple[str, dict | BaseException]:
    try:
        return package.task_id, _wire(package)
    except Exception as exc:  # noqa: BLE001 — counted, and the first one shown
        return package.task_id, exc


async def _plan_in_tasks(packages) -> list[tuple[str, dict | BaseException]]:
    """Half the tasks plan on the event loop's own thread, half in worker threads, all at once."""

    async def on_loop(package):
        await asyncio.sleep(0)
        return _attempt(package)

    async def in_thread(package):
        return await asyncio.to_thread(_attempt, package)

    return await asyncio.gather(*((on_loop if n % 2 else in_thread)(package) for n, package in enumerate(packages)))


def test_threads_and_tasks_planning_the_families_at_once_each_get_the_serial_plan(tiny_switch_interval):
    serial = {package.task_id: _wire(package) for package in PACKAGES}
    packages = PACKAGES * ROUNDS
    with ThreadPoolExecutor(THREADS) as pool:
        in_threads = pool.map(_attempt, packages)
        in_tasks = asyncio.run(_plan_in_tasks(packages))  # while the pool's threads plan too
        outcomes = [*in_threads, *in_tasks]
    tally = _tally(serial, outcomes)
    assert tally == {"plans": 2 * len(packages), "wrong": 0, "failed": 0, "first failure": []}, tally


def test_two_builds_interleaved_op_by_op_keep_their_own_ops():
    """Two threads take turns inside their graph bodies, a's first op, b's, a's second, b's:
    neither op lands in the other's plan."""
    turns = [threading.Event() for _ in range(5)]  # turn k may start once turns[k] is set
    plans: dict[str, dict] = {}

    def build(name: str, first_turn: int) -> None:
        def take(turn: int, make):
            assert turns[turn].wait(timeout=30), f"{name} waited for turn {turn}"
            try:
                return make()
            finally:
                turns[turn + 1].set()

        @graph
        def body():
            first = take(first_turn, lambda: upper(id="first", text=f"{name} 1"))
            second = take(first_turn + 2, lambda: upper(id="second", text=first["text"]))
            second >> END

        plans[name] = body.compile().to_wire()

    threads = [threading.Thread(target=build, args=(name, n)) for n, name in enumerate("ab")]
    for thread in threads:
        thread.start()
    turns[0].set()
    for thread in threads:
        thread.join(timeout=30)
    for name in "ab":
        assert name in plans, f"{name}'s build failed"
        assert [(n["id"], n["params"]["text"]) for n in plans[name]["nodes"]] == [
            ("first", f"{name} 1"),
            ("second", "${first.output.text}"),
        ], name


def test_an_op_made_in_another_thread_during_a_build_is_refused_not_added():
    errors: list[BaseException] = []

    def elsewhere():
        try:
            upper(text="stray")
        except BuildError as exc:
            errors.append(exc)

    @graph
    def body():
        mine = upper(text="mine")
        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
        mine >> END

    assert [n.id for n in body.compile().nodes] == ["mine"]
    assert [str(e) for e in errors] == ["text_transform(...) is used outside a @graph being built"]
