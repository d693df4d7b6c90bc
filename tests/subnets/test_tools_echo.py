"""``echo``: returns its params, charges its cost, fails its first attempts, delays on request."""

import asyncio

import pytest

from subnets.base import ToolContext, ToolError
from subnets.echo import echo


def ctx(attempt: int = 1) -> ToolContext:
    return ToolContext(task_id="t", node_id="n", attempt=attempt, timeout_seconds=5.0)


async def test_returns_text_code_and_metadata_and_charges_cost():
    result = await echo({"text": "hi", "code": "x = 1", "metadata": {"k": [1, 2]}, "cost": 0.25}, ctx())
    assert result.output.as_dict() == {"text": "hi", "artifacts": {"code": "x = 1", "metadata": {"k": [1, 2]}}}
    assert result.cost_tao == 0.25


async def test_empty_params_give_empty_output_at_no_cost():
    result = await echo({}, ctx())
    assert result.output.as_dict() == {"text": "", "artifacts": {"code": "", "metadata": {}}}
    assert result.cost_tao == 0.0


@pytest.mark.parametrize("fail_first", [1, 3])
async def test_fail_first_fails_exactly_the_first_attempts_and_each_charges_cost(fail_first):
    params = {"text": "ok", "cost": 0.5, "fail_first": fail_first}
    for attempt in range(1, fail_first + 1):
        with pytest.raises(ToolError) as err:
            await echo(params, ctx(attempt))
        assert err.value.cost_tao == 0.5
        assert f"attempt {attempt}" in str(err.value)
    result = await echo(params, ctx(fail_first + 1))
    assert result.output.text == "ok" and result.cost_tao == 0.5


def test_zero_delay_completes_without_suspending():
    coro = echo({"text": "now", "delay_s": 0}, ctx())
    with pytest.raises(StopIteration) as done:
        coro.send(None)
    assert done.value.value.output.text == "now"


async def test_positive_delay_suspends_on_a_timer():
    coro = echo({"text": "later", "delay_s": 0.01}, ctx())
    try:
        waiting_on = coro.send(None)
    finally:
        coro.close()
    assert isinstance(waiting_on, asyncio.Future)


async def test_delay_is_waited_before_answering():
    result = await echo({"text": "slow", "delay_s": 0.01}, ctx())
    assert result.output.text == "slow"


@pytest.mark.parametrize(
    "params, field",
    [
        ({"delay_s": -1}, "delay_s"),
        ({"cost": -0.1}, "cost"),
        ({"cost": "lots"}, "cost"),
        ({"fail_first": -2}, "fail_first"),
        ({"metadata": [1]}, "metadata"),
        ({"text": 5}, "text"),
        ({"txet": "typo"}, "txet"),
        ({"delay_s": float("inf")}, "delay_s"),
    ],
)
async def test_bad_params_name_the_field(params, field):
    with pytest.raises(ToolError, match=field):
        await echo(params, ctx())


@pytest.mark.parametrize(
    "params, part",
    [
        ({"text": "x" * (16 * 1024 + 1)}, "text"),
        ({"text": "é" * (8 * 1024 + 1)}, "text"),  # 2 bytes per char: the limit is in UTF-8 bytes
        ({"code": "x" * (64 * 1024 + 1)}, "code"),
        ({"metadata": {"blob": "x" * (16 * 1024)}}, "metadata"),
    ],
)
async def test_oversize_output_is_a_failure_not_a_truncation(params, part):
    with pytest.raises(ToolError, match=part):
        await echo(params, ctx())


async def test_output_at_the_limit_passes_whole():
    result = await echo({"text": "x" * (16 * 1024)}, ctx())
    assert len(result.output.text) == 16 * 1024
