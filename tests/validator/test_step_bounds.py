"""A step is bounded whatever its miners send: its work is shared among the plans it
executes, its deadline settles unfinished executions as their miners' failures, and
replies are checked off the event loop (validator/validation.py)."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from engine.budget import Cores
from engine.owned import CPU_EXHAUSTED, OwnedLimits, evaluate_owned
from neurons.localrun import family_task, owned_runner
from planners import load_planner
from protocol.metagraph import Peer
from protocol.output import NodeOutput
from protocol.synapse import WorkflowSynapse
from protocol.task import Task
from protocol.validation import check_plan_for
from subnets.base import ToolRegistry, ToolResult, ToolSpec, run_in_thread
from subnets.runner import LocalRunner
from validator import validation as step_module
from validator.client import Reply
from validator.validation import DEADLINE_REASON, OwnedExecution, StepBounds, validation_step

SYBILS = 32


class _Replies:
    """A client whose miners answer at once with the bodies given, one per URL."""

    own_s = 0.0

    def __init__(self, bodies: dict[str, bytes]) -> None:
        self.bodies = bodies

    async def query_workflow(self, url: str, hotkey: str, package) -> Reply:
        return Reply(200, self.bodies[url], None, 0.0, url, hotkey)


def _answer(task: Task, plan: dict | None = None) -> tuple[WorkflowSynapse, bytes]:
    """The good planner's answer to ``task``, its plan replaced by ``plan`` when given."""
    answer = load_planner("good").plan(task.package()).answer(task.package(), miner_uid=0)
    body = answer.model_dump(mode="json", by_alias=True, exclude_none=True)
    if plan is not None:
        body["workflow_plan"] = plan
    return answer, WorkflowSynapse.model_validate(body).model_dump_json(by_alias=True, exclude_none=True).encode()


def _heavy_plan(nodes: int, items: int) -> dict:
    """The worst plan found: parallel json_transform nodes, each deduplicating ``items``
    distinct values 64 times (about 1.4 s of CPU for 12,000 items) to an output too large."""
    node = {
        "subnet": "sn8",
        "action": "json_transform",
        "params": {"data": list(range(items)), "ops": [{"op": "unique"}] * 64},
    }
    return {"nodes": [{"id": f"n{i}", **node} for i in range(nodes)], "edges": [], "max_parallel": 64}


def _miners(n: int) -> list[Peer]:
    return [Peer(uid, f"hotkey-{uid}", f"http://miner-{uid}") for uid in range(n)]


@pytest.mark.e2e
async def test_one_honest_miner_among_32_sybils_keeps_its_score_and_the_step_ends_in_time() -> None:
    task = family_task("dt_sales", 4242)
    answer, honest = _answer(task)
    _, sybil = _answer(task, _heavy_plan(12, 12_000))
    miners = _miners(SYBILS + 1)  # the honest miner last: every sybil is ahead of it
    bodies = {m.url: sybil for m in miners[:-1]} | {miners[-1].url: honest}
    alone = await asyncio.to_thread(
        evaluate_owned,
        answer.workflow_plan,
        check_plan_for(answer.workflow_plan, task),
        task,
        owned_runner(task),
        total_estimated_cost=answer.total_estimated_cost,
    )
    bounds = StepBounds(work_s=0.25 * len(miners), deadline_s=120.0)
    with ThreadPoolExecutor(max_workers=16) as pool:
        result = await validation_step(
            task=task,
            miners=miners,
            client=_Replies(bodies),
            runner_factory=lambda package, _: owned_runner(task),
            owned=OwnedExecution(pool),
            bounds=bounds,
        )
    *sybils, honest_outcome = result.outcomes
    assert honest_outcome.reason is None, honest_outcome.reason
    assert honest_outcome.score.model_dump() == alone.score.model_dump()
    for outcome in sybils:
        reasons = {node.reason for node in outcome.execution.nodes.values()}
        assert any(reason and ("cpu limit exceeded" in reason or CPU_EXHAUSTED in reason) for reason in reasons)
    # Unbounded, the sybils' plans ask 32 x 12 x 1.4 s of CPU; shared, the step's 8.25 s.
    assert result.timings.query_s + result.timings.execute_s <= bounds.deadline_s


async def test_an_execution_unfinished_at_the_deadline_is_its_miners_failure_and_winds_down() -> None:
    task = family_task("dt_sales", 4242)
    answer, honest = _answer(task)
    stuck_plan = {
        "nodes": [
            {"id": "a", "subnet": "sn8", "action": "json_transform", "params": {"data": [], "ops": []}},
            {"id": "b", "subnet": "sn8", "action": "json_transform", "params": {"data": [], "ops": []}},
        ],
        "edges": [{"from": "a", "to": "b"}],
    }
    _, stuck = _answer(task, stuck_plan)
    release, ran = threading.Event(), []

    def blocking(params: dict, ctx) -> ToolResult:
        ran.append(ctx.node_id)
        release.wait(30)
        return ToolResult(NodeOutput(text="[]"))

    registry = ToolRegistry()
    registry.register(ToolSpec(name="json_transform", fn=run_in_thread(blocking)))
    miners = _miners(2)
    runners = {0: lambda: owned_runner(task), 1: lambda: LocalRunner(registry, subnets=task.available_tools)}
    with ThreadPoolExecutor(max_workers=2) as pool:
        result = await validation_step(
            task=task,
            miners=miners,
            client=_Replies({miners[0].url: honest, miners[1].url: stuck}),
            runner_factory=lambda package, miner: runners[miner.uid](),
            owned=OwnedExecution(pool, cores=Cores(2)),
            bounds=StepBounds(work_s=100.0, deadline_s=2.0),
        )
        release.set()
    honest_outcome, stuck_outcome = result.outcomes
    assert honest_outcome.reason is None and honest_outcome.score.S > 0
    assert stuck_outcome.reason == DEADLINE_REASON
    assert stuck_outcome.score.S == 0.0 and stuck_outcome.execution is None
    assert ran == ["a"]  # its next node found its work refused: the thread was freed


def test_each_plan_gets_its_share_of_the_steps_work_never_more_than_its_own_cap() -> None:
    bounds = StepBounds(work_s=30.0, deadline_s=60.0)
    assert bounds.share(OwnedLimits(), 1).cpu_per_plan_s == 10.0
    assert bounds.share(OwnedLimits(), 33).cpu_per_plan_s == pytest.approx(30.0 / 33)
    with pytest.raises(ValueError):
        StepBounds(work_s=0.0, deadline_s=1.0)


async def test_replies_are_checked_off_the_event_loop(monkeypatch) -> None:
    task = family_task("dt_sales", 4242)
    _, honest = _answer(task)
    loop_thread, seen = threading.get_ident(), []
    real = step_module.check_response

    def spy(*args, **kwargs):
        seen.append(threading.get_ident())
        return real(*args, **kwargs)

    monkeypatch.setattr(step_module, "check_response", spy)
    miners = _miners(1)
    with ThreadPoolExecutor(max_workers=1) as pool:
        await validation_step(
            task=task,
            miners=miners,
            client=_Replies({miners[0].url: honest}),
            runner_factory=lambda package, _: owned_runner(task),
            owned=OwnedExecution(pool),
        )
    assert seen and loop_thread not in seen


async def test_a_plan_gets_the_share_the_reference_gets_whatever_the_others_send(monkeypatch) -> None:
    """Three of four miners send invalid answers and the step's work binds: the one plan
    executed runs on one share among the four miners asked, the share the stepper gives the
    reference it runs beside them (``bounds.share(limits, len(miners))``), not one among the
    valid answers (which gave a miner sending the reference's plan four times its work)."""
    task = family_task("dt_sales", 4242)
    _, honest = _answer(task)
    bounds, seen = StepBounds(work_s=2.0, deadline_s=60.0), []
    real = step_module.run_owned

    def spy(*args, owned, **kwargs):
        seen.append(owned)
        return real(*args, owned=owned, **kwargs)

    monkeypatch.setattr(step_module, "run_owned", spy)
    miners = _miners(4)
    bodies = {miners[0].url: honest, **{m.url: b'{"not": "an answer"}' for m in miners[1:]}}
    with ThreadPoolExecutor(max_workers=1) as pool:
        result = await validation_step(
            task=task,
            miners=miners,
            client=_Replies(bodies),
            bounds=bounds,
            runner_factory=lambda package, _: owned_runner(task),
            owned=OwnedExecution(pool),
        )
    assert [o.execution is not None for o in result.outcomes] == [True, False, False, False]
    assert seen == [bounds.share(OwnedLimits(), len(miners))]
    assert seen[0].cpu_per_plan_s == 0.5 < OwnedLimits().cpu_per_plan_s  # the allowance binds


def test_cores_go_to_the_plan_that_has_used_least() -> None:
    cores, order, holding = Cores(1), [], threading.Event()

    def piece(name: str, used: float, started: threading.Event) -> None:
        started.set()
        with cores.turn(used):
            order.append(name)

    with cores.turn(0.0):  # the one core is busy while three plans queue for it
        threads = []
        for name, used in (("sybil-a", 5.0), ("sybil-b", 3.0), ("honest", 0.01)):
            started = threading.Event()
            threads.append(threading.Thread(target=piece, args=(name, used, started)))
            threads[-1].start()
            started.wait()
        while len(cores._waiting) < 3:
            holding.wait(0.01)
    for thread in threads:
        thread.join()
    assert order == ["honest", "sybil-b", "sybil-a"]
