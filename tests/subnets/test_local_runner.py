"""``LocalRunner``: nodes run on the registry by action; subnets add price, latency and flakiness."""

import asyncio

import pytest

from protocol.output import NodeOutput
from protocol.runner import NodeCall, NodeResult
from protocol.synapse import ToolInfo
from subnets.base import ToolContext, ToolError, ToolRegistry, ToolResult, ToolSpec
from subnets.registry import default_registry
from subnets.runner import LocalRunner


def call(action: str = "echo", params: dict | None = None, *, subnet: str = "sn1", attempt: int = 1) -> NodeCall:
    return NodeCall(
        task_id="t",
        node_id="n1",
        subnet=subnet,
        action=action,
        params=params or {},
        timeout_seconds=5.0,
        attempt=attempt,
    )


class Recorder:
    """A tool that records each call (and returns/raises what the test asks)."""

    def __init__(self, outcome=None, log: list | None = None):
        self.calls: list[ToolContext] = []
        self.outcome = outcome
        self.log = log if log is not None else []

    async def __call__(self, params, ctx):
        self.calls.append(ctx)
        self.log.append(("tool", ctx.attempt))
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome or ToolResult(NodeOutput(text="done"), cost_tao=0.01)


def registry_with(tool) -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(ToolSpec(name="probe", fn=tool))
    return registry


@pytest.fixture
def sleeps(monkeypatch):
    """Record asyncio.sleep calls (in order with tool calls) instead of sleeping."""
    log: list[tuple[str, float]] = []

    async def fake_sleep(delay, result=None):
        log.append(("sleep", delay))
        return result

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    return log


async def test_runs_the_action_on_the_registry_whatever_the_subnet():
    runner = LocalRunner(default_registry())
    result = await runner.run(call(params={"text": "hi", "cost": 0.2}, subnet="any-subnet-name"))
    assert result == NodeResult(output=NodeOutput(text="hi"), cost_tao=0.2)


async def test_the_tool_sees_the_call_context():
    tool = Recorder()
    await LocalRunner(registry_with(tool)).run(call("probe", attempt=3))
    ctx = tool.calls[0]
    assert (ctx.task_id, ctx.node_id, ctx.attempt, ctx.timeout_seconds) == ("t", "n1", 3, 5.0)


async def test_subnet_cost_is_charged_on_top_of_the_tool_cost():
    runner = LocalRunner(default_registry(), {"sn1": ToolInfo(type="echo", avg_cost=0.5)})
    result = await runner.run(call(params={"text": "x", "cost": 0.25}))
    assert result.output.text == "x"
    assert result.cost_tao == pytest.approx(0.75)


async def test_subnet_cost_is_charged_on_a_failed_tool_attempt_too():
    runner = LocalRunner(default_registry(), {"sn1": ToolInfo(type="echo", avg_cost=0.5)})
    result = await runner.run(call(params={"cost": 0.25, "fail_first": 1}))
    assert result.output is None and "planned failure" in result.error
    assert result.cost_tao == pytest.approx(0.75)


async def test_subnet_latency_is_awaited_before_the_tool_runs(sleeps):
    tool = Recorder(log=sleeps)
    runner = LocalRunner(registry_with(tool), {"sn1": ToolInfo(type="x", avg_latency=0.25)})
    result = await runner.run(call("probe"))
    assert result.error is None
    assert sleeps == [("sleep", 0.25), ("tool", 1)]


async def test_zero_latency_subnet_completes_without_suspending():
    runner = LocalRunner(default_registry(), {"sn1": ToolInfo(type="echo", avg_cost=0.1)})
    coro = runner.run(call(params={"text": "fast"}))
    with pytest.raises(StopIteration) as done:
        coro.send(None)
    assert done.value.value.output.text == "fast"


async def test_subnet_outside_the_table_fails_cleanly_without_running_the_tool():
    tool = Recorder()
    runner = LocalRunner(registry_with(tool), {"sn1": ToolInfo(type="x", avg_cost=1.0)})
    result = await runner.run(call("probe", subnet="sn9"))
    assert result.output is None and result.cost_tao == 0.0
    assert "sn9" in result.error and "sn1" in result.error
    assert tool.calls == []


async def test_flaky_subnet_fails_its_first_attempts_with_cost_and_latency(sleeps):
    tool = Recorder(log=sleeps)
    runner = LocalRunner(registry_with(tool), {"sn1": ToolInfo(type="x", avg_cost=0.5, avg_latency=0.1, fail_first=2)})
    for attempt in (1, 2):
        result = await runner.run(call("probe", attempt=attempt))
        assert result == NodeResult(output=None, cost_tao=0.5, error=f"subnet sn1 unavailable (attempt {attempt})")
    assert tool.calls == []
    result = await runner.run(call("probe", attempt=3))
    assert result.output.text == "done" and result.cost_tao == pytest.approx(0.51)
    assert [ctx.attempt for ctx in tool.calls] == [3]
    assert sleeps == [("sleep", 0.1), ("sleep", 0.1), ("sleep", 0.1), ("tool", 3)]


async def test_tool_error_becomes_an_error_result_with_its_cost():
    tool = Recorder(ToolError("nothing found", cost_tao=0.3))
    result = await LocalRunner(registry_with(tool)).run(call("probe"))
    assert result == NodeResult(output=None, cost_tao=0.3, error="nothing found")


async def test_any_other_exception_is_an_internal_tool_error_and_never_propagates():
    tool = Recorder(ValueError("boom"))
    result = await LocalRunner(registry_with(tool)).run(call("probe"))
    assert result.output is None
    assert result.error == "internal tool error: ValueError: boom"


async def test_cancellation_propagates_so_the_executor_can_time_out_a_node():
    tool = Recorder(asyncio.CancelledError())
    with pytest.raises(asyncio.CancelledError):
        await LocalRunner(registry_with(tool)).run(call("probe"))


async def test_unknown_action_fails_cleanly():
    result = await LocalRunner(default_registry()).run(call("teleport"))
    assert result.output is None and "unknown action 'teleport'" in result.error


@pytest.mark.parametrize(
    "outcome, message",
    [
        (ToolResult({"text": "x" * (16 * 1024 + 1)}), "output rejected: text"),  # type: ignore[arg-type]
        (ToolResult({"text": "ok", "extra": 1}), "output rejected: extra"),  # type: ignore[arg-type]
        (ToolResult(NodeOutput(text="ok"), cost_tao=-1.0), "tool reported an invalid cost"),
        (ToolResult(NodeOutput(text="ok"), cost_tao=float("nan")), "tool reported an invalid cost"),
    ],
)
async def test_malformed_tool_results_are_failures(outcome, message):
    result = await LocalRunner(registry_with(Recorder(outcome))).run(call("probe"))
    assert result.output is None and result.error.startswith(message)


async def test_plain_dict_output_that_fits_is_validated_into_a_node_output():
    tool = Recorder(ToolResult({"text": "ok", "artifacts": {"metadata": {"a": 1}}}))  # type: ignore[arg-type]
    result = await LocalRunner(registry_with(tool)).run(call("probe"))
    assert result.output == NodeOutput.model_validate({"text": "ok", "artifacts": {"metadata": {"a": 1}}})


async def test_huge_error_messages_are_cut():
    tool = Recorder(ToolError("e" * 10_000))
    result = await LocalRunner(registry_with(tool)).run(call("probe"))
    assert len(result.error) <= 2000 and result.error.endswith("[truncated]")
