"""Owned execution runs on simulated time: a plan's score is a pure function of plan,
task and seed, whatever the machine is doing (engine/simclock.py, engine/owned.py)."""

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.simclock import SimulatedLoop, run_simulated

ROOT = Path(__file__).resolve().parents[2]


def test_sleeps_and_timeouts_take_simulated_time_only():
    async def main():
        loop = asyncio.get_running_loop()

        async def node(delay):
            await asyncio.sleep(delay)
            return loop.time()

        finished = await asyncio.gather(node(0.3), node(0.1), node(50.0))
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(1.0):
                await asyncio.sleep(100)
        return finished, loop.time()

    wall = time.perf_counter()
    finished, now = run_simulated(main())
    assert finished == [0.3, 0.1, 50.0]
    assert now == 51.0
    assert time.perf_counter() - wall < 5  # 151 simulated seconds, none of them waited


def test_work_in_a_thread_runs_inline_and_takes_no_simulated_time():
    async def main():
        loop = asyncio.get_running_loop()
        before = loop.time()
        threads = await asyncio.gather(*(asyncio.to_thread(_burn_and_name) for _ in range(3)))
        return threads, loop.time() - before

    threads, elapsed = run_simulated(main())
    import threading

    assert set(threads) == {threading.current_thread().name}
    assert elapsed == 0.0


def _burn_and_name():
    import threading

    sum(range(200_000))
    return threading.current_thread().name


def test_cancelled_timers_do_not_move_the_clock():
    async def main():
        loop = asyncio.get_running_loop()
        handles = [loop.call_later(1000.0 + i, lambda: None) for i in range(5)]
        for handle in handles:
            handle.cancel()
        await asyncio.sleep(2.0)
        return loop.time()

    assert run_simulated(main()) == 2.0


def test_the_loop_is_closed_and_left_tasks_are_cancelled():
    seen = []

    async def forever():
        try:
            await asyncio.sleep(1e9)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def main():
        asyncio.get_running_loop().create_task(forever())
        await asyncio.sleep(1.0)
        return "done"

    assert run_simulated(main()) == "done"
    assert seen == ["cancelled"]
    assert isinstance(SimulatedLoop(), asyncio.AbstractEventLoop)


SCORE_ALL = """
import json, sys
from tasks import FamilyTasks
from planners import load_planner
from neurons.localrun import family_task
from subnets.owned import owned_runner
from protocol.validation import check_plan_for
from engine.owned import evaluate_owned

seed = int(sys.argv[1])
scores = {}
for base in FamilyTasks().tasks():
    task = family_task(base.task_id, seed)
    package = task.package()
    answer = load_planner(sys.argv[2]).plan(package).answer(package, 0)
    check = check_plan_for(answer.workflow_plan, task)
    evaluation = evaluate_owned(
        answer.workflow_plan, check, task, owned_runner(task), total_estimated_cost=answer.total_estimated_cost
    )
    scores[base.task_id] = evaluation.score.model_dump(mode="json")
print(json.dumps(scores, sort_keys=True))
"""


def _score_all(seed: int, planner: str, hash_seed: str) -> dict:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    done = subprocess.run(
        [sys.executable, "-c", SCORE_ALL, str(seed), planner],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.e2e
def test_scores_are_bit_identical_on_a_quiet_and_a_loaded_machine():
    """Every family, the good and the naive plan: the score object (latency term
    included) is the same with two busy loops beside the validator and another hash
    seed, as on a quiet machine."""
    quiet = {planner: _score_all(7, planner, "1") for planner in ("good", "naive")}
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        loaded = {planner: _score_all(7, planner, "2") for planner in ("good", "naive")}
    finally:
        for process in busy:
            process.kill()
            process.wait()
    assert len(quiet["good"]) == 40
    assert loaded == quiet
    latencies = [score["details"]["latency_s"] for score in quiet["naive"].values()]
    assert all(latency > 0 for latency in latencies)
