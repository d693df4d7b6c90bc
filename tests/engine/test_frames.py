"""Generator nodes and frames (docs/execution.md): frame instances stream, run in
parallel, fail alone, and stay within the frame limits and the budget.

The fake runner's generator emits exactly the frames the test feeds it, when the
test feeds them; instances wait on gates the test opens. Nothing here sleeps or
measures time: order and concurrency are observed, not timed.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from engine.executor import Event, Execution, ExecutorConfig, execute
from engine.report import run_report
from neurons.cli import app
from protocol.output import NodeOutput
from protocol.plan import WorkflowPlan
from protocol.runner import Emit, NodeCall, NodeResult
from protocol.validation import check_plan
from support.plans import node, plan

ROOT = Path(__file__).resolve().parents[2]


class FrameFeed:
    """A runner whose generator nodes emit what the test feeds them.

    Ordinary nodes answer like ``echo`` with their params' ``text``; a node whose
    text is in ``fail`` fails. ``gate(text)`` holds every call with that text until
    the test opens it; ``started(text)`` is set when such a call starts.
    """

    def __init__(self, fail: frozenset[str] = frozenset()) -> None:
        self.feeds: dict[str, asyncio.Queue[NodeOutput | BaseException | None]] = {}
        self.gates: dict[str, asyncio.Event] = {}
        self.starts: dict[str, asyncio.Event] = {}
        self.fail = fail
        self.active = 0
        self.max_active = 0
        self.refused: list[str] = []  # frames emit() said no to
        self.calls: list[NodeCall] = []

    def feed(self, generator: str, *texts: str) -> None:
        queue = self.feeds.setdefault(generator, asyncio.Queue())
        for text in texts:
            queue.put_nowait(NodeOutput(text=text))

    def finish(self, generator: str, error: BaseException | None = None) -> None:
        self.feeds.setdefault(generator, asyncio.Queue()).put_nowait(error)

    def gate(self, text: str) -> asyncio.Event:
        return self.gates.setdefault(text, asyncio.Event())

    def started(self, text: str) -> asyncio.Event:
        return self.starts.setdefault(text, asyncio.Event())

    async def run(self, call: NodeCall) -> NodeResult:
        self.calls.append(call)
        text = str(call.params.get("text", call.node_id))
        self.started(text).set()
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            if text in self.gates:
                await self.gates[text].wait()
        finally:
            self.active -= 1
        if text in self.fail:
            return NodeResult(None, cost_tao=call.params.get("cost", 0.0), error=f"planned failure of {text}")
        metadata = {"frames": call.params["frames"]} if "frames" in call.params else {}
        output = NodeOutput.model_validate({"text": text, "artifacts": {"metadata": metadata}})
        return NodeResult(output, cost_tao=call.params.get("cost", 0.0))

    async def run_frames(self, call: NodeCall, emit: Emit) -> NodeResult:
        self.calls.append(call)
        queue = self.feeds.setdefault(call.node_id, asyncio.Queue())
        count = 0
        while True:
            item = await queue.get()
            if item is None:
                return NodeResult(NodeOutput(text=f"{count} frames"))
            if isinstance(item, BaseException):
                return NodeResult(None, error=str(item))
            count += 1
            if not emit(item):
                self.refused.append(item.text)


def chain(**gather: Any) -> WorkflowPlan:
    """g (generator) -> n (per frame) -> m (per frame) -> c (gathers m's frames)."""
    return plan(
        node("g", "split"),
        node("n", text="${g.output.text}"),
        node("m", text="m.${n.output.text}"),
        node("c", "collect", item="${m.output.text}", **gather),
        edges="g>n n>m m>c",
    )


async def execute_with(p: WorkflowPlan, runner: FrameFeed, events: list[Event] | None = None, **kw: Any) -> Execution:
    config = ExecutorConfig(**{k: kw.pop(k) for k in list(kw) if k in ExecutorConfig.__dataclass_fields__})
    return await execute(
        p,
        runner,
        task_id="t",
        budget_ceiling=kw.pop("ceiling", None),
        deadline_s=None,
        config=config,
        on_event=events.append if events is not None else None,
        **kw,
    )


def transitions(events: list[Event], node_id: str, frame: int | None = None) -> list[tuple[str, str, str | None]]:
    return [(e.old, e.new, e.reason) for e in events if e.node_id == node_id and e.frame == frame]


# -- streaming and parallelism ------------------------------------------------------------


async def test_instances_start_before_the_generator_emits_its_last_frame() -> None:
    runner, events = FrameFeed(), []
    task = asyncio.create_task(execute_with(chain(), runner, events))
    runner.feed("g", "f0")
    await runner.started("m.f0").wait()  # frame 0 went through n and m while g runs
    assert [e.new for e in events if e.node_id == "g"] == ["ready", "running"]
    runner.feed("g", "f1")
    await runner.started("m.f1").wait()
    runner.finish("g")
    ex = await task
    assert ex.status == "completed"
    gathered = ex.nodes["c"].output["artifacts"]["metadata"]["frames"]
    assert [frame["item"] for frame in gathered] == ["m.f0", "m.f1"]  # in frame order
    g_done = next(i for i, e in enumerate(events) if e.node_id == "g" and e.new == "success")
    m0_ran = next(i for i, e in enumerate(events) if (e.node_id, e.frame, e.new) == ("m", 0, "success"))
    assert m0_ran < g_done


async def test_instances_of_different_frames_run_at_once() -> None:
    runner = FrameFeed()
    gates = [runner.gate(f"f{i}") for i in range(4)]
    task = asyncio.create_task(execute_with(chain(), runner))
    runner.feed("g", "f0", "f1", "f2", "f3")
    for i in range(4):
        await runner.started(f"f{i}").wait()
    assert runner.active == 4  # all four instances of n are in flight together
    for gate in gates:
        gate.set()
    runner.finish("g")
    ex = await task
    assert ex.status == "completed" and runner.max_active == 4
    assert [r.frame for r in ex.nodes["n"].instances] == [0, 1, 2, 3]


async def test_instances_keep_max_parallel() -> None:
    runner = FrameFeed()
    task = asyncio.create_task(execute_with(chain(), runner, max_parallel=2))
    runner.feed("g", *(f"f{i}" for i in range(6)))
    runner.finish("g")
    ex = await task
    assert ex.status == "completed"
    assert runner.max_active <= 1  # the generator holds one of the two slots while it runs


async def test_instances_keep_touches() -> None:
    p = plan(node("g", "split"), {**node("n", text="${g.output.text}"), "touches": ["db"]}, edges="g>n")
    runner = FrameFeed()
    gates = [runner.gate(f"f{i}") for i in range(3)]
    task = asyncio.create_task(execute_with(p, runner))
    runner.feed("g", "f0", "f1", "f2")
    runner.finish("g")
    await runner.started("f0").wait()
    for gate in gates:
        await asyncio.sleep(0)  # let anything that wrongly could start, start
        assert runner.active == 1
        gate.set()
    assert (await task).status == "completed"
    assert runner.max_active == 1


# -- failure stays in its frame -------------------------------------------------------------


async def test_a_failed_instance_blocks_only_its_own_frame() -> None:
    runner, events = FrameFeed(fail=frozenset({"f1"})), []
    task = asyncio.create_task(execute_with(chain(), runner, events))
    runner.feed("g", "f0", "f1", "f2")
    runner.finish("g")
    ex = await task
    assert ex.status == "partial"
    assert [r.status for r in ex.nodes["n"].instances] == ["success", "failed", "success"]
    assert [(r.status, r.reason) for r in ex.nodes["m"].instances] == [
        ("success", None),
        ("blocked", "ancestor_failed:n[1]"),
        ("success", None),
    ]
    assert (ex.nodes["n"].status, ex.nodes["n"].reason) == ("failed", "n[1]: planned failure of f1")
    assert (ex.nodes["c"].status, ex.nodes["c"].reason) == ("blocked", "ancestor_failed:m[1]")
    assert transitions(events, "m", 1) == [("pending", "ready", None), ("ready", "blocked", "ancestor_failed:n[1]")]
    # completion: g 1, n 2/3, m 2/3, c 0 — a scoped node weighs one node, whatever its frames.
    assert ex.metrics.completion_ratio == pytest.approx((1 + 2 / 3 + 2 / 3 + 0) / 4)
    assert ex.metrics.hard_failures == 3  # n, m and c, each counted once


async def test_a_generator_that_fails_after_frames_keeps_them_and_is_not_retried() -> None:
    p = WorkflowPlan.model_validate({**chain().to_wire(), "error_handling": {"g": {"retry_count": 3}}})
    runner = FrameFeed()
    task = asyncio.create_task(execute_with(p, runner))
    runner.feed("g", "f0")
    runner.finish("g", RuntimeError("source went away"))
    ex = await task
    assert (ex.nodes["g"].status, ex.nodes["g"].attempts, ex.nodes["g"].frames) == ("failed", 1, 1)
    assert [r.status for r in ex.nodes["m"].instances] == ["success"]  # frame 0 stands
    assert (ex.nodes["m"].status, ex.nodes["m"].reason) == ("blocked", "ancestor_failed:g")
    assert (ex.nodes["c"].status, ex.nodes["c"].reason) == ("blocked", "ancestor_failed:g")


async def test_a_generator_that_fails_before_its_first_frame_is_retried() -> None:
    p = WorkflowPlan.model_validate({**chain().to_wire(), "error_handling": {"g": {"retry_count": 1}}})
    runner = FrameFeed()
    task = asyncio.create_task(execute_with(p, runner))
    runner.finish("g", RuntimeError("not yet"))
    runner.feed("g", "f0")
    runner.finish("g")
    ex = await task
    assert (ex.status, ex.nodes["g"].attempts) == ("completed", 2)


async def test_a_generator_with_no_frames_runs_its_gather_on_nothing() -> None:
    runner = FrameFeed()
    task = asyncio.create_task(execute_with(chain(), runner))
    runner.finish("g")
    ex = await task
    assert ex.status == "completed" and ex.metrics.completion_ratio == 1.0
    assert ex.nodes["n"].instances == () and ex.nodes["n"].status == "success"
    assert ex.nodes["c"].output["artifacts"]["metadata"]["frames"] == []


async def test_a_runner_without_frames_fails_the_generator_and_blocks_its_scope() -> None:
    class Plain:
        async def run(self, call: NodeCall) -> NodeResult:
            return NodeResult(NodeOutput(text="x"))

    ex = await execute(chain(), Plain(), task_id="t", budget_ceiling=None, deadline_s=None)
    assert (ex.nodes["g"].status, ex.nodes["g"].reason) == ("failed", "this runner cannot run generator nodes")
    assert [ex.nodes[n].reason for n in "nmc"] == ["ancestor_failed:g"] * 3


# -- limits and budget --------------------------------------------------------------------------


async def test_frames_past_the_per_node_limit_fail_the_generator() -> None:
    runner = FrameFeed()
    task = asyncio.create_task(execute_with(chain(), runner, max_frames=2))
    runner.feed("g", "f0", "f1", "f2")
    runner.finish("g")
    ex = await task
    assert (ex.nodes["g"].status, ex.nodes["g"].reason, ex.nodes["g"].frames) == ("failed", "frame_limit:2", 2)
    assert runner.refused == ["f2"]
    assert [r.status for r in ex.nodes["m"].instances] == ["success", "success"]
    assert ex.nodes["c"].reason == "ancestor_failed:g"


async def test_frame_instances_past_the_per_plan_limit_fail_the_generator() -> None:
    runner = FrameFeed()
    task = asyncio.create_task(execute_with(chain(), runner, max_frame_instances=5))
    runner.feed("g", "f0", "f1", "f2")  # two instances per frame (n, m): the third frame needs 6
    runner.finish("g")
    ex = await task
    assert (ex.nodes["g"].status, ex.nodes["g"].reason) == ("failed", "frame_instance_limit:5")
    assert len(ex.nodes["n"].instances) == len(ex.nodes["m"].instances) == 2


async def test_each_instance_reserves_its_estimate_against_the_ceiling() -> None:
    p = plan(node("g", "split"), node("n", estimated_cost=1.0, text="${g.output.text}", cost=1.0), edges="g>n")
    runner, events = FrameFeed(), []
    gates = [runner.gate(f"f{i}") for i in range(5)]
    task = asyncio.create_task(execute_with(p, runner, events, ceiling=2.5))
    runner.feed("g", *(f"f{i}" for i in range(5)))
    await runner.started("f2").wait()
    for gate in gates:
        gate.set()
    runner.finish("g")
    ex = await task
    assert ex.status == "budget_abort"
    # Three instances fit under 2.5 (reserved 0, 1, 2 when each was dispatched); the rest never run.
    assert [r.status for r in ex.nodes["n"].instances] == ["success"] * 3 + ["budget_abort"] * 2
    assert ex.metrics.cost_tao == pytest.approx(3.0)
    assert ex.nodes["n"].cost_tao == pytest.approx(3.0)
    assert transitions(events, "n", 4)[-1] == ("pending", "budget_abort", "budget_ceiling")


# -- events and the report ------------------------------------------------------------------------


async def test_every_instance_is_ready_exactly_once_and_the_report_lists_instances() -> None:
    runner, events = FrameFeed(fail=frozenset({"f1"})), []
    task = asyncio.create_task(execute_with(chain(), runner, events))
    runner.feed("g", "f0", "f1", "f2")
    runner.finish("g")
    ex = await task
    for node_id in "nm":
        for frame in range(3):
            steps = transitions(events, node_id, frame)
            assert [new for _, new, _ in steps].count("ready") == 1, (node_id, frame)
        assert transitions(events, node_id) == [("pending", ex.nodes[node_id].status, ex.nodes[node_id].reason)]
    report = run_report(ex)
    assert json.loads(json.dumps(report)) == report
    n = report["nodes"]["n"]
    assert [(i["frame"], i["status"]) for i in n["instances"]] == [(0, "success"), (1, "failed"), (2, "success")]
    assert n["instances"][0]["output"]["text"] == "f0" and n["output"] is None
    assert n["attempts"] == 3 and report["nodes"]["g"]["frames"] == 3
    assert n["instances"][1]["attempt_log"][0]["error"] == "planned failure of f1"
    assert report["total_steps"] == 4


# -- the plan check --------------------------------------------------------------------------------


def test_plan_check_scopes_nodes_under_their_generator() -> None:
    check = check_plan(chain())
    assert check.valid
    assert check.frames.members == {"g": ["n", "m"]}
    assert check.frames.generator_of == {"n": "g", "m": "g"}
    assert check.frames.gathered == {"c": "g"}


def test_plan_check_refuses_mixed_frames_and_nested_generators() -> None:
    p = plan(
        node("g1", "split"),
        node("g2", "split"),
        node("pair", text="${g1.output.text}${g2.output.text}"),
        node("inner", "split", text="${g1.output.text}"),
        node("edge_only"),
        edges="g1>pair g2>pair g1>inner g1>edge_only",
    )
    check = check_plan(p)
    assert check.node_errors == {"pair": "mixed_frames:g1,g2", "inner": "nested_generator:g1"}
    assert "edge_only" not in check.frames.generator_of  # an edge alone scopes nothing


def test_dagnet_plan_check_accepts_the_frames_example_and_says_what_runs_per_frame() -> None:
    example = str(ROOT / "examples" / "frames_words.json")
    result = CliRunner().invoke(app, ["plan", "check", example])
    assert result.exit_code == 0, result.output
    assert "generator words: per frame shout, mark; gathered by all" in result.output
    found = json.loads(CliRunner().invoke(app, ["plan", "check", example, "--json"]).stdout)
    assert found["frames"] == {"per_frame": {"words": ["shout", "mark"]}, "gathers": {"all": "words"}}


def test_dagnet_plan_check_reports_a_refused_frame_scope(tmp_path) -> None:
    p = plan(
        node("g1", "split"),
        node("g2", "split"),
        node("pair", text="${g1.output.text}${g2.output.text}"),
        edges="g1>pair g2>pair",
    )
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(p.to_wire()))
    result = CliRunner().invoke(app, ["plan", "check", str(path)])
    assert result.exit_code == 2
    assert "pair: mixed_frames:g1,g2" in result.output


def test_dagnet_run_streams_the_frames_example() -> None:
    result = CliRunner().invoke(app, ["run", str(ROOT / "examples" / "frames_words.json"), "--events"])
    assert result.exit_code == 0, result.output
    *lines, last = [json.loads(line) for line in result.stdout.splitlines()]
    report = last["report"]
    assert report["status"] == "completed"
    assert report["final_output"]["text"] == "0:ALPHA, 1:BETA, 2:GAMMA, 3:DELTA"
    assert [i["output"]["text"] for i in report["nodes"]["shout"]["instances"]] == ["ALPHA", "BETA", "GAMMA", "DELTA"]
    ready = [(line["node"], line.get("frame")) for line in lines if line["to"] == "ready"]
    assert len(ready) == len(set(ready)) == 1 + 4 + 4 + 1


# -- over the network: a real miner as the provider --------------------------------------------------


async def test_a_generator_runs_on_a_remote_provider_and_its_frames_fan_out() -> None:
    from protocol.metagraph import Peer
    from protocol.synapse import RoutingRule, TaskPackage
    from support.miner import running_miner
    from validator.client import MinerClient
    from validator.remote import RemoteRunner, every_peer_serves

    p = WorkflowPlan.model_validate(json.loads((ROOT / "examples" / "frames_words.json").read_text()))
    package = TaskPackage(task_id="t1", task_type="agent", routing_policy={"default": RoutingRule(top_k=2)})
    async with running_miner() as miner, MinerClient(miner.validator) as client:
        peer = Peer(uid=0, hotkey=miner.keypair.ss58_address, url=miner.url)
        runner = RemoteRunner(client, every_peer_serves([peer, peer]), package)
        ex = await execute(p, runner, task_id="t1", budget_ceiling=None, deadline_s=None)
        raw = await miner.post(
            "/NodeSynapse",
            {
                "task_id": "t1",
                "node_id": "w",
                "subnet": "data",
                "action": "split",
                "params": {"items": [1, "b"]},
            },
        )
    assert ex.status == "completed", {k: (r.status, r.reason) for k, r in ex.nodes.items()}
    assert ex.final_output["text"] == "0:ALPHA, 1:BETA, 2:GAMMA, 3:DELTA"
    assert ex.nodes["words"].frames == 4 and ex.nodes["words"].output["artifacts"]["metadata"] == {"frames": 4}
    body = raw.json()
    assert [f["text"] for f in body["frames"]] == ["1", "b"]  # every frame in the one response
    assert body["frames"][1]["artifacts"]["metadata"] == {"item": "b", "index": 1}


def test_a_validator_process_sets_its_frame_limits() -> None:
    from neurons.validator import ValidatorProcessConfig

    config = ValidatorProcessConfig(dev_key="//Alice", max_frames=7, max_frame_instances=70).executor_config()
    assert (config.max_frames, config.max_frame_instances) == (7, 70)
    assert ExecutorConfig().max_frames == 1000 and ExecutorConfig().max_frame_instances == 10_000
    with pytest.raises(ValueError):
        ValidatorProcessConfig(dev_key="//Alice", max_frames=-1)
    help_text = CliRunner().invoke(app, ["validator", "--help"], terminal_width=200).output
    assert "--max-frames" in help_text and "--max-frame-instances" in help_text


async def test_a_gather_outside_any_frames_receives_its_one_resolution() -> None:
    p = plan(node("a", text="x"), node("c", "collect", item="${a.output.text}", sep="+"), edges="a>c")
    ex = await execute(p, FrameFeed(), task_id="t", budget_ceiling=None, deadline_s=None)
    assert ex.nodes["c"].output["artifacts"]["metadata"]["frames"] == [{"item": "x", "sep": "+"}]
