"""The DAG executor against docs/execution.md, with a scripted runner whose timing the tests control."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.evaluate import budget_ceiling
from engine.executor import Event, Execution, ExecutorConfig, execute
from protocol.output import NodeOutput
from protocol.plan import WorkflowPlan
from protocol.runner import NodeCall, NodeResult
from protocol.validation import check_plan
from support.plans import node, plan
from support.scale import examples

FINAL = {"success", "failed", "blocked", "budget_abort"}


class ScriptedRunner:
    """Behaves by the node's params, like ``echo``, plus gates the test opens.

    params: ``text``/``metadata`` (output), ``cost`` (per attempt), ``fail`` (fail the
    first N attempts), ``hang`` (attempts 1..N never return), ``raise`` (attempts
    1..N raise), ``unplanned`` (reported transport retries). A node with a gate waits
    for it before answering.
    """

    def __init__(self) -> None:
        self.calls: list[NodeCall] = []
        self.gates: dict[str, asyncio.Event] = {}
        self.started: dict[str, asyncio.Event] = {}
        self.cancelled: list[str] = []
        self.active = 0
        self.max_active = 0

    def gate(self, node_id: str) -> asyncio.Event:
        return self.gates.setdefault(node_id, asyncio.Event())

    def started_event(self, node_id: str) -> asyncio.Event:
        return self.started.setdefault(node_id, asyncio.Event())

    async def run(self, call: NodeCall) -> NodeResult:
        self.calls.append(call)
        self.started_event(call.node_id).set()
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            return await self._answer(call)
        except asyncio.CancelledError:
            self.cancelled.append(call.node_id)
            raise
        finally:
            self.active -= 1

    async def _answer(self, call: NodeCall) -> NodeResult:
        p = call.params
        if call.node_id in self.gates:
            await self.gates[call.node_id].wait()
        if call.attempt <= p.get("hang", 0):
            await asyncio.Event().wait()
        if call.attempt <= p.get("raise", 0):
            raise RuntimeError("boom")
        cost = p.get("cost", 0.0)
        if call.attempt <= p.get("fail", 0):
            return NodeResult(None, cost_tao=cost, error=f"planned failure {call.attempt}")
        text = str(p.get("text", call.node_id))
        output = NodeOutput.model_validate({"text": text, "artifacts": {"metadata": p.get("metadata", {})}})
        return NodeResult(output, cost_tao=cost, unplanned_retries=p.get("unplanned", 0))

    def attempts(self, node_id: str) -> int:
        return sum(1 for c in self.calls if c.node_id == node_id)


async def run(
    p: WorkflowPlan,
    runner: ScriptedRunner | None = None,
    *,
    ceiling: float | None = None,
    deadline: float | None = None,
    events: list[Event] | None = None,
    on_event: Callable[[Event], None] | None = None,
    **config: Any,
) -> Execution:
    sink = on_event or (events.append if events is not None else None)
    return await execute(
        p,
        runner or ScriptedRunner(),
        task_id="t1",
        budget_ceiling=ceiling,
        deadline_s=deadline,
        config=ExecutorConfig(**config),
        on_event=sink,
    )


def statuses(ex: Execution) -> dict[str, str]:
    return {k: r.status for k, r in ex.nodes.items()}


def concurrency(events: list[Event]) -> list[set[str]]:
    """The set of running nodes after every event."""
    running: set[str] = set()
    snapshots = []
    for e in events:
        if e.new == "running":
            running.add(e.node_id)
        elif e.old == "running":
            running.discard(e.node_id)
        snapshots.append(set(running))
    return snapshots


# -- scheduling by dependency ----------------------------------------------------------


async def test_slow_branch_does_not_hold_an_independent_chain() -> None:
    runner = ScriptedRunner()
    slow_gate = runner.gate("slow")
    chain_done = asyncio.Event()
    events: list[Event] = []

    def on_event(e: Event) -> None:
        events.append(e)
        if e.node_id == "c3" and e.new == "success":
            chain_done.set()

    p = plan(node("slow"), node("after_slow"), node("c1"), node("c2"), node("c3"), edges="slow>after_slow c1>c2 c2>c3")
    task = asyncio.create_task(run(p, runner, on_event=on_event))
    async with asyncio.timeout(5):  # a tier-barrier executor never gets here
        await chain_done.wait()
    slow_gate.set()
    ex = await task
    assert ex.status == "completed"
    order = [e.node_id for e in events if e.new == "success"]
    assert order.index("c3") < order.index("slow")


async def test_max_parallel_is_min_of_plan_and_validator_cap() -> None:
    for plan_cap, validator_cap in ((2, 64), (8, 3)):
        runner = ScriptedRunner()
        events: list[Event] = []
        p = plan(*(node(f"n{i}") for i in range(6)), max_parallel=plan_cap)
        await run(p, runner, events=events, max_parallel=validator_cap)
        assert max(len(s) for s in concurrency(events)) == min(plan_cap, validator_cap)
        assert runner.max_active <= min(plan_cap, validator_cap)


async def test_nodes_touching_one_resource_never_overlap() -> None:
    events: list[Event] = []
    p = plan(node("a", touches=["db"]), node("b", touches=["db"]), node("c", touches=["cache"]))
    ex = await run(p, events=events)
    assert ex.status == "completed"
    snapshots = concurrency(events)
    assert not any({"a", "b"} <= s for s in snapshots)
    assert any({"a", "c"} <= s for s in snapshots)  # the non-conflicting node did not wait


async def test_parallel_unsafe_node_runs_alone() -> None:
    events: list[Event] = []
    p = plan(node("a"), node("u", parallel_safe=False), node("b"), node("c"))
    ex = await run(p, events=events)
    assert ex.status == "completed"
    for s in concurrency(events):
        if "u" in s:
            assert s == {"u"}


async def test_dispatch_order_is_deterministic() -> None:
    p = plan(node("b1"), node("a"), node("b2"), node("z"), edges="a>b2")
    orders = []
    for _ in range(2):
        events: list[Event] = []
        await run(p, events=events, max_parallel=1)
        orders.append([e.node_id for e in events if e.new == "running"])
    assert orders[0] == orders[1] == ["b1", "a", "b2", "z"]


# -- budget ----------------------------------------------------------------------------


def test_budget_ceiling_rule() -> None:
    assert budget_ceiling(1.0, 0.5) == 0.75
    assert budget_ceiling(0.5, 1.0) == 0.5
    assert budget_ceiling(0.5, 0.0) == 0.5
    assert budget_ceiling(None, 2.0) == 3.0
    assert budget_ceiling(None, 0.0) is None


async def test_budget_counts_estimates_reserved_by_in_flight_nodes() -> None:
    runner = ScriptedRunner()
    p = plan(
        node("a", estimated_cost=0.6, cost=0.5),
        node("b", estimated_cost=0.6, cost=0.5),
        node("c", estimated_cost=0.6, cost=0.5),
        node("d", estimated_cost=0.6),
        edges="a>d",
    )
    events: list[Event] = []
    ex = await run(p, runner, ceiling=1.0, events=events)
    # a and b were dispatched (0 + 0.6 < 1.0); c saw 0.6 + 0.6 reserved >= 1.0.
    assert statuses(ex) == {"a": "success", "b": "success", "c": "budget_abort", "d": "budget_abort"}
    assert ex.nodes["c"].reason == "budget_ceiling"
    assert ex.status == "budget_abort"
    assert ex.metrics.cost_tao == pytest.approx(1.0)  # in-flight nodes finished and were charged
    assert ex.metrics.hard_failures == 0
    assert runner.attempts("c") == runner.attempts("d") == 0
    assert_lifecycles(ex, events)  # a settling after the abort does not revive d


async def test_budget_spent_stops_what_follows() -> None:
    p = plan(
        node("a", estimated_cost=0.1, cost=1.0),
        node("b", estimated_cost=0.1, cost=1.0),
        node("c", estimated_cost=0.1),
        edges="a>b b>c",
    )
    ex = await run(p, ceiling=1.0)
    assert statuses(ex) == {"a": "success", "b": "budget_abort", "c": "budget_abort"}
    assert ex.metrics.cost_tao == 1.0


# -- DataRefs and failure propagation ----------------------------------------------------


async def test_seed_000_an_edge_alone_never_blocks() -> None:
    p = plan(node("A", text="alpha"), node("B", fail=1), node("C", text="${A.output.text}!"), edges="A>C B>C")
    runner = ScriptedRunner()
    ex = await run(p, runner)
    assert statuses(ex) == {"A": "success", "B": "failed", "C": "success"}
    assert ex.nodes["C"].output["text"] == "alpha!"
    assert ex.metrics.completion_ratio == pytest.approx(2 / 3)
    assert ex.metrics.hard_failures == 1
    assert ex.status == "partial"


async def test_whole_value_ref_passes_the_json_value() -> None:
    runner = ScriptedRunner()
    p = plan(
        node("A", metadata={"items": [1, {"k": "v"}]}),
        node("B", items="${A.output.artifacts.metadata.items}"),
        edges="A>B",
    )
    await run(p, runner)
    (call,) = [c for c in runner.calls if c.node_id == "B"]
    assert call.params["items"] == [1, {"k": "v"}]


async def test_ancestor_failed_names_the_first_failing_ref() -> None:
    events: list[Event] = []
    p = plan(
        node("A", fail=1),
        node("B", fail=1),
        node("C", text="${B.output.text} ${A.output.text}"),
        node("D", text="${C.output.text}"),
        edges="A>C B>C C>D",
    )
    runner = ScriptedRunner()
    ex = await run(p, runner, events=events)
    assert ex.nodes["C"].reason == "ancestor_failed:B"
    assert ex.nodes["D"].reason == "ancestor_failed:C"
    assert statuses(ex)["D"] == "blocked"
    assert runner.attempts("C") == runner.attempts("D") == 0
    assert ex.metrics.hard_failures == 4
    assert ("ready", "blocked") in [(e.old, e.new) for e in events if e.node_id == "C"]


async def test_missing_field_blocks_with_the_ref_text() -> None:
    p = plan(node("A"), node("C", x="${A.output.artifacts.metadata.nope}"), edges="A>C")
    ex = await run(p)
    assert ex.nodes["C"].status == "blocked"
    assert ex.nodes["C"].reason == "missing_field:${A.output.artifacts.metadata.nope}"


async def test_static_node_error_blocks_before_anything_runs() -> None:
    events: list[Event] = []
    p = plan(node("A"), node("B", x="${A.output.text}"), node("C"), edges="C>A")
    runner = ScriptedRunner()
    ex = await run(p, runner, events=events)
    assert ex.nodes["B"].status == "blocked"
    assert ex.nodes["B"].reason == "dataref_not_upstream:A"
    assert (events[0].node_id, events[0].old, events[0].new) == ("B", "pending", "blocked")
    assert runner.attempts("B") == 0
    assert statuses(ex)["A"] == "success"


# -- retries, timeouts, runner misbehaviour -----------------------------------------------


async def test_retries_until_success_and_charge_every_attempt() -> None:
    p = plan(node("A", cost=0.1, fail=2), error_handling={"A": {"retry_count": 2}})
    ex = await run(p)
    rec = ex.nodes["A"]
    assert (rec.status, rec.attempts) == ("success", 3)
    assert rec.cost_tao == pytest.approx(0.3)
    assert ex.metrics.retries == 2
    assert ex.metrics.cost_tao == pytest.approx(0.3)
    log = rec.attempt_log
    assert [a.error for a in log] == ["planned failure 1", "planned failure 2", None]
    assert rec.started_s == log[0].started_s
    assert all(a.started_s <= a.finished_s for a in log)
    assert log[0].finished_s <= log[1].started_s and log[1].finished_s <= log[2].started_s
    assert log[2].finished_s <= rec.finished_s


async def test_with_the_real_echo_tool_fail_first_retries_and_delay_times_out() -> None:
    from subnets.registry import default_registry
    from subnets.runner import LocalRunner

    p = plan(
        node("A", text="hi", fail_first=1, cost=0.1),
        node("B", delay_s=5.0),
        error_handling={"A": {"retry_count": 1}, "B": {"timeout_seconds": 0.05}},
    )
    ex = await execute(p, LocalRunner(default_registry()), task_id="t", budget_ceiling=None, deadline_s=None)
    a, b = ex.nodes["A"], ex.nodes["B"]
    assert (a.status, a.attempts, a.output["text"]) == ("success", 2, "hi")
    assert a.cost_tao == pytest.approx(0.2)
    assert (b.status, b.reason, b.timeouts) == ("failed", "timeout after 0.05s", 1)


async def test_exhausted_attempts_fail_with_the_last_error() -> None:
    p = plan(node("A", fail=5), error_handling={"A": {"retry_count": 1}})
    ex = await run(p)
    assert (ex.nodes["A"].status, ex.nodes["A"].attempts) == ("failed", 2)
    assert ex.nodes["A"].reason == "planned failure 2"
    assert ex.metrics.hard_failures == 1


async def test_timed_out_attempt_counts_and_is_cancelled() -> None:
    runner = ScriptedRunner()
    p = plan(
        node("A", hang=1, cost=0.2),
        node("B", hang=9),
        error_handling={"A": {"retry_count": 1, "timeout_seconds": 0.05}, "B": {"timeout_seconds": 0.05}},
    )
    ex = await run(p, runner)
    assert (ex.nodes["A"].status, ex.nodes["A"].attempts, ex.nodes["A"].timeouts) == ("success", 2, 1)
    assert ex.nodes["A"].cost_tao == pytest.approx(0.2)  # the timed-out attempt charged nothing
    assert ex.nodes["B"].status == "failed"
    assert ex.nodes["B"].reason == "timeout after 0.05s"
    assert ex.metrics.timeouts == 2
    assert sorted(runner.cancelled) == ["A", "B"]


class _Stubborn:
    """Swallows the cancellation of a timed-out attempt and answers anyway."""

    async def run(self, call: NodeCall) -> NodeResult:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            pass
        return NodeResult(NodeOutput(text="late"))


async def test_an_answer_after_the_timeout_is_still_a_timeout() -> None:
    p = plan(node("A"), error_handling={"A": {"retry_count": 1, "timeout_seconds": 0.02}})
    ex = await execute(p, _Stubborn(), task_id="t", budget_ceiling=None, deadline_s=None)
    assert (ex.nodes["A"].status, ex.nodes["A"].timeouts) == ("failed", 2)


async def test_default_timeout_applies_without_error_handling() -> None:
    ex = await run(plan(node("A", hang=1)), default_timeout_s=0.05)
    assert ex.nodes["A"].reason == "timeout after 0.05s"


async def test_runner_exception_is_a_failed_attempt() -> None:
    p = plan(node("A", **{"raise": 1}), node("B", **{"raise": 9}), error_handling={"A": {"retry_count": 1}})
    ex = await run(p)
    assert ex.nodes["A"].status == "success"
    assert ex.nodes["B"].reason == "runner error: RuntimeError: boom"


class _Garbage:
    def __init__(self, result: Any) -> None:
        self.result = result

    async def run(self, call: NodeCall) -> Any:
        return self.result


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        ("nope", "runner returned str, not NodeResult"),
        (NodeResult(NodeOutput(), cost_tao=-1.0), "runner reported an invalid cost: -1.0"),
        (NodeResult(NodeOutput(), cost_tao=math.nan), "runner reported an invalid cost: nan"),
        (NodeResult({"text": "x"}), "runner returned malformed output (dict)"),  # type: ignore[arg-type]
        (NodeResult(None), "no output"),
    ],
)
async def test_malformed_runner_results_fail_the_node(result: Any, reason: str) -> None:
    ex = await execute(plan(node("A")), _Garbage(result), task_id="t", budget_ceiling=None, deadline_s=None)
    assert (ex.nodes["A"].status, ex.nodes["A"].reason) == ("failed", reason)
    assert ex.metrics.cost_tao == 0.0


async def test_unplanned_retries_reported_by_the_runner_are_summed() -> None:
    ex = await run(plan(node("A", unplanned=2), node("B", unplanned=1)))
    assert ex.metrics.unplanned_retries == 3
    assert ex.nodes["A"].unplanned_retries == 2


# -- deadline and cancellation ------------------------------------------------------------


async def test_deadline_fails_running_and_blocks_the_rest_without_leaks() -> None:
    runner = ScriptedRunner()
    p = plan(node("A", hang=9), node("B", text="${A.output.text}"), node("C", cost=0.5), edges="A>B")
    ex = await run(p, runner, deadline=0.1)
    assert (ex.nodes["A"].status, ex.nodes["A"].reason) == ("failed", "deadline")
    assert (ex.nodes["B"].status, ex.nodes["B"].reason) == ("blocked", "deadline")
    assert ex.nodes["C"].status == "success"
    assert ex.metrics.timeouts == 0
    assert ex.metrics.hard_failures == 2
    [attempt] = ex.nodes["A"].attempt_log  # cut by the deadline, logged as such
    assert (attempt.error, attempt.finished_s) == ("deadline", ex.nodes["A"].finished_s)
    assert ex.nodes["B"].attempt_log == ()
    assert runner.cancelled == ["A"]
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_cancelling_the_caller_cancels_every_attempt() -> None:
    runner = ScriptedRunner()
    p = plan(node("A", hang=9), node("B", hang=9))
    task = asyncio.create_task(run(p, runner))
    async with asyncio.timeout(5):
        await runner.started_event("A").wait()
        await runner.started_event("B").wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(runner.cancelled) == ["A", "B"]
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_a_raising_event_callback_surfaces_without_leaking_tasks() -> None:
    def on_event(e: Event) -> None:
        if e.new == "success":
            raise KeyError("callback bug")

    with pytest.raises(KeyError):
        await run(plan(node("A"), node("B"), edges="A>B"), on_event=on_event)
    assert asyncio.all_tasks() == {asyncio.current_task()}


# -- events, metrics, final output ----------------------------------------------------------


_ALLOWED = {
    ("pending", "ready"),
    ("ready", "running"),
    ("running", "success"),
    ("running", "failed"),
    ("pending", "blocked"),
    ("pending", "budget_abort"),
    ("ready", "blocked"),
    ("ready", "budget_abort"),
}


def assert_lifecycles(ex: Execution, events: list[Event]) -> None:
    by_node: dict[str, list[Event]] = {k: [] for k in ex.nodes}
    for e in events:
        by_node[e.node_id].append(e)
    for node_id, evs in by_node.items():
        state = "pending"
        for e in evs:
            assert e.old == state, (node_id, evs)
            assert (e.old, e.new) in _ALLOWED, (node_id, e)
            state = e.new
        assert state == ex.nodes[node_id].status
        assert [e.new for e in evs].count("ready") <= 1
        if ex.nodes[node_id].attempts:
            assert [e.new for e in evs].count("ready") == 1
    times = [e.t for e in events]
    assert times == sorted(times)


async def test_events_once_per_transition() -> None:
    events: list[Event] = []
    p = plan(
        node("A"),
        node("B", fail=1),
        node("C", text="${B.output.text}"),
        node("D", x="${A.output.nope}"),
        node("E", x="${C.output.text}"),
        node("F", x="${Z.output.text}"),
        node("Z"),
        edges="A>C B>C A>D C>E",
    )
    ex = await run(p, events=events)
    assert_lifecycles(ex, events)
    assert [(e.old, e.new) for e in events if e.node_id == "A"] == [
        ("pending", "ready"),
        ("ready", "running"),
        ("running", "success"),
    ]
    assert [(e.old, e.new, e.reason) for e in events if e.node_id == "E"] == [
        ("pending", "ready", None),
        ("ready", "blocked", "ancestor_failed:C"),
    ]


async def test_metrics_and_records() -> None:
    p = plan(
        node("A", cost=0.25),
        node("B", cost=0.5, fail=1),
        node("C", fail=9),
        edges="A>B",
        error_handling={"B": {"retry_count": 1}},
    )
    ex = await run(p)
    m = ex.metrics
    assert m.completion_ratio == pytest.approx(2 / 3)
    assert m.cost_tao == pytest.approx(1.25)
    assert (m.retries, m.timeouts, m.hard_failures) == (1, 0, 1)
    a, b = ex.nodes["A"], ex.nodes["B"]
    assert 0 <= a.started_s <= a.finished_s <= b.started_s <= b.finished_s
    assert m.latency_s >= b.finished_s - a.started_s - 1e-9
    assert a.output == {"text": "A", "artifacts": {"code": "", "metadata": {}}}
    assert ex.nodes["C"].output is None


@pytest.mark.parametrize(
    ("fields", "edges", "fails", "expected"),
    [
        ({"output_node": "A"}, "A>B", set(), "A"),
        ({}, "A>B", set(), "B"),  # the single sink
        ({}, "", set(), "B"),  # several sinks: the last that succeeded
        ({}, "", {"B"}, "A"),
        ({"output_node": "A"}, "", {"A"}, "A"),  # output node failed: no final output
    ],
)
async def test_final_output_rules(fields: dict, edges: str, fails: set, expected: str) -> None:
    p = plan(*(node(n, text=f"out-{n}", fail=9 if n in fails else 0) for n in "AB"), edges=edges, **fields)
    ex = await run(p)
    assert ex.output_node == expected
    if expected in fails:
        assert ex.final_output is None
    else:
        assert ex.final_output["text"] == f"out-{expected}"


async def test_no_final_output_when_every_sink_failed() -> None:
    ex = await run(plan(node("A", fail=1), node("B", fail=1)))
    assert (ex.output_node, ex.final_output) == (None, None)


async def test_invalid_plan_runs_nothing() -> None:
    runner = ScriptedRunner()
    p = plan(node("a"), node("b"), node("r"), edges="r>a a>b b>a")
    ex = await run(p, runner)
    assert ex.status == "invalid"
    assert "cycle: a -> b -> a" in ex.errors
    assert runner.calls == []
    assert ex.nodes == {}
    assert ex.total_steps == 3
    assert ex.metrics.completion_ratio == ex.metrics.cost_tao == ex.metrics.hard_failures == 0


async def test_a_given_check_is_used() -> None:
    p = plan(node("a"))
    check = check_plan(p, allowed_subnets=["other"])
    ex = await execute(p, ScriptedRunner(), task_id="t", budget_ceiling=None, deadline_s=None, check=check)
    assert ex.status == "invalid"
    assert ex.errors == check.errors != []


# -- random plans ------------------------------------------------------------------------


@st.composite
def random_plans(draw: st.DrawFn) -> tuple[WorkflowPlan, float | None]:
    n = draw(st.integers(1, 14))
    nodes, edges = [], []
    for i in range(n):
        preds = sorted(draw(st.sets(st.integers(0, max(0, i - 1)), max_size=3))) if i else []
        edges += [f"n{p}>n{i}" for p in preds if p < i]
        refs = draw(st.lists(st.integers(0, n - 1), max_size=2))
        text = " ".join(f"${{n{r}.output.{draw(st.sampled_from(['text', 'artifacts.code', 'nope']))}}}" for r in refs)
        nodes.append(
            node(
                f"n{i}",
                estimated_cost=draw(st.sampled_from([0.0, 0.1, 0.5])),
                text=text or f"n{i}",
                fail=draw(st.sampled_from([0, 0, 1, 3])),
                cost=draw(st.sampled_from([0.0, 0.2])),
                touches=draw(st.lists(st.sampled_from(["r1", "r2"]), max_size=1)),
                parallel_safe=draw(st.booleans()) or draw(st.booleans()),
            )
        )
    retries = {f"n{i}": {"retry_count": draw(st.integers(0, 2))} for i in range(n) if draw(st.booleans())}
    p = plan(*nodes, edges=" ".join(dict.fromkeys(edges)), error_handling=retries, max_parallel=draw(st.integers(1, 4)))
    return p, draw(st.sampled_from([None, 0.3, 1.0]))


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_plans())
def test_every_random_plan_settles_every_node_and_counts_add_up(case: tuple[WorkflowPlan, float | None]) -> None:
    p, ceiling = case
    events: list[Event] = []
    ex = asyncio.run(run(p, ceiling=ceiling, events=events))
    assert ex.status != "invalid"
    counts = {s: sum(1 for r in ex.nodes.values() if r.status == s) for s in FINAL}
    assert sum(counts.values()) == len(p.nodes) == ex.total_steps
    assert ex.metrics.completion_ratio == pytest.approx(counts["success"] / len(p.nodes))
    assert ex.metrics.hard_failures == counts["failed"] + counts["blocked"]
    assert ex.metrics.retries == sum(max(0, r.attempts - 1) for r in ex.nodes.values())
    assert ex.metrics.cost_tao == pytest.approx(sum(r.cost_tao for r in ex.nodes.values()))
    assert (ex.status == "completed") == (counts["success"] == len(p.nodes))
    assert (ex.status == "budget_abort") == (counts["budget_abort"] > 0)
    for r in ex.nodes.values():
        assert (r.output is not None) == (r.status == "success")
        assert (r.attempts > 0) == (r.started_s is not None)
    assert_lifecycles(ex, events)


# -- ${input.*} refs -----------------------------------------------------------------------


@pytest.mark.parametrize("edges", ["", "a>b"])
async def test_input_refs_resolve_without_a_node_named_input(edges: str) -> None:
    """``${input.*}`` names no plan node: building the run must not look it up in the graph."""
    p = plan(node("a", text="${input.name}"), node("b", text="${a.output.text}/${input.rows.1}"), edges=edges)
    if not edges:  # b's ref to a needs an edge; without one only the input refs are tested
        p = plan(node("a", text="${input.name}"), node("b", text="${input.rows.1}"))
    ex = await execute(
        p,
        ScriptedRunner(),
        task_id="t1",
        budget_ceiling=None,
        deadline_s=None,
        inputs={"name": "ada", "rows": ["x", "y"]},
    )
    assert statuses(ex) == {"a": "success", "b": "success"}
    assert ex.nodes["a"].output["text"] == "ada"
    assert ex.nodes["b"].output["text"] == ("ada/y" if edges else "y")


async def test_an_input_ref_without_inputs_blocks_its_node_with_missing_field() -> None:
    ex = await run(plan(node("a", text="${input.name}"), node("b")))
    assert ex.nodes["a"].status == "blocked"
    assert ex.nodes["a"].reason == "missing_field:${input.name}"
    assert ex.nodes["b"].status == "success"
