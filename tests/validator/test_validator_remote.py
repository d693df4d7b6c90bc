"""RemoteRunner: top_k providers per routing rule, aggregation, cost sum, transport retries."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from engine.executor import execute
from protocol.metagraph import Peer
from protocol.plan import PlanNode, WorkflowPlan
from protocol.runner import NodeCall
from protocol.synapse import RoutingRule, TaskPackage
from support.keys import dev_keypair
from support.peers import CLOSE, GARBAGE, raw_peer, serve_asgi
from validator.client import MinerClient
from validator.remote import RemoteRunner, every_peer_serves

VALIDATOR = dev_keypair("Alice")


class FakeProvider:
    """A tool provider that answers ``text`` at ``cost``; the first ``unavailable`` calls get 503."""

    def __init__(self, text: str, cost: float = 0.0, *, unavailable: int = 0, error: str | None = None) -> None:
        self.text, self.cost, self.unavailable, self.error = text, cost, unavailable, error
        self.calls: list[dict] = []
        self.app = Starlette(routes=[Route("/NodeSynapse", self._endpoint, methods=["POST"])])

    async def _endpoint(self, request: Request) -> Response:
        self.calls.append(json.loads(await request.body()))
        if len(self.calls) <= self.unavailable:
            return JSONResponse({"error": "overloaded"}, status_code=503)
        if self.error is not None:
            return JSONResponse({"output": None, "cost_tao": self.cost, "error": self.error})
        return JSONResponse({"output": {"text": self.text}, "cost_tao": self.cost})


@contextlib.asynccontextmanager
async def providers(*fakes: FakeProvider) -> AsyncIterator[list[Peer]]:
    async with contextlib.AsyncExitStack() as stack:
        urls = [await stack.enter_async_context(serve_asgi(fake.app)) for fake in fakes]
        yield [Peer(uid=i, hotkey=dev_keypair(f"provider-{i}").ss58_address, url=url) for i, url in enumerate(urls)]


def _package(**routing: RoutingRule) -> TaskPackage:
    return TaskPackage(task_id="t1", task_type="agent", routing_policy=routing)


def _call(subnet: str = "sn1", attempt: int = 1) -> NodeCall:
    return NodeCall(
        task_id="t1",
        node_id="n1",
        subnet=subnet,
        action="echo",
        params={"text": "q"},
        timeout_seconds=5.0,
        attempt=attempt,
    )


async def _run(peers: list[Peer], package: TaskPackage, call: NodeCall | None = None, retries: int = 1):
    async with MinerClient(VALIDATOR) as client:
        runner = RemoteRunner(client, every_peer_serves(peers), package, transport_retries=retries)
        return await runner.run(call or _call())


async def test_sends_to_the_top_k_providers_of_the_subnet_rule_and_sums_their_cost() -> None:
    fakes = FakeProvider("a", 0.01), FakeProvider("b", 0.02), FakeProvider("c", 0.04)
    async with providers(*fakes) as peers:
        result = await _run(peers, _package(sn1=RoutingRule(top_k=2), default=RoutingRule(top_k=3)))
    assert [len(f.calls) for f in fakes] == [1, 1, 0]
    assert result.cost_tao == 0.01 + 0.02
    assert result.output is not None and result.output.text == "a"  # two-way tie → first provider


async def test_default_rule_applies_to_unlisted_subnets_and_majority_wins() -> None:
    fakes = FakeProvider("x", 0.01), FakeProvider("y", 0.01), FakeProvider("y", 0.01)
    async with providers(*fakes) as peers:
        result = await _run(peers, _package(sn1=RoutingRule(top_k=1), default=RoutingRule(top_k=3)), _call("sn7"))
    assert result.output is not None and result.output.text == "y"
    assert result.cost_tao == 0.03
    assert all(len(f.calls) == 1 for f in fakes)


async def test_median_logit_aggregates_numeric_answers() -> None:
    fakes = FakeProvider("10"), FakeProvider("abc"), FakeProvider("2"), FakeProvider("4")
    async with providers(*fakes) as peers:
        result = await _run(peers, _package(default=RoutingRule(top_k=4, aggregation="median_logit")))
    assert result.output is not None and result.output.text == "4"


async def test_the_resolved_node_reaches_the_provider_with_its_attempt_number() -> None:
    fake = FakeProvider("ok")
    async with providers(fake) as peers:
        await _run(peers, _package(), _call(attempt=3))
    assert fake.calls == [
        {
            "task_id": "t1",
            "node_id": "n1",
            "subnet": "sn1",
            "action": "echo",
            "params": {"text": "q"},
            "timeout_seconds": 5.0,
            "attempt": 3,
        }
    ]


async def test_transport_retry_on_5xx_is_counted_as_unplanned() -> None:
    flaky = FakeProvider("fine", 0.05, unavailable=1)
    async with providers(flaky) as peers:
        result = await _run(peers, _package(), retries=1)
    assert result.output is not None and result.output.text == "fine"
    assert result.unplanned_retries == 1
    assert len(flaky.calls) == 2
    assert result.cost_tao == 0.05


async def test_transport_retries_reach_the_execution_metrics() -> None:
    flaky = FakeProvider("fine", 0.05, unavailable=1)
    plan = WorkflowPlan(nodes=[PlanNode(id="only", subnet="sn1", action="echo")])
    async with providers(flaky) as peers, MinerClient(VALIDATOR) as client:
        runner = RemoteRunner(client, every_peer_serves(peers), _package())
        execution = await execute(plan, runner, task_id="t1", budget_ceiling=None, deadline_s=10.0)
    assert execution.status == "completed"
    assert execution.metrics.unplanned_retries == 1
    assert execution.metrics.retries == 0  # the plan declared none; the validator's own retry is not one


async def test_retries_stop_at_the_transport_retry_budget() -> None:
    down = FakeProvider("never", unavailable=10)
    async with providers(down) as peers:
        result = await _run(peers, _package(), retries=2)
    assert result.output is None and result.error is not None and result.error.startswith("http 503")
    assert result.unplanned_retries == 2
    assert len(down.calls) == 3


async def test_connection_closed_is_retried_then_fails() -> None:
    async with raw_peer(CLOSE) as peer:
        result = await _run([Peer(0, dev_keypair("closer").ss58_address, peer.url)], _package(), retries=1)
    assert result.output is None and result.error.startswith("connection closed")
    assert result.unplanned_retries == 1
    assert peer.connections == 2


async def test_a_call_is_sent_as_its_own_fields_and_a_bad_node_id_is_never_sent() -> None:
    provider = FakeProvider("a")
    bad = NodeCall("t1", "not a node id", "sn1", "echo", {}, 5.0, 1)
    async with providers(provider) as peers:
        await _run(peers, _package())
        refused = await _run(peers, _package(), bad)
    assert provider.calls == [dataclasses.asdict(_call())]  # the wire body is the NodeCall, field for field
    assert refused.output is None and refused.error.startswith("cannot build node request: node_id")


async def test_garbage_response_is_a_failed_attempt_and_never_retried() -> None:
    async with raw_peer(GARBAGE) as peer:
        result = await _run([Peer(0, dev_keypair("garbler").ss58_address, peer.url)], _package())
    assert result.output is None and result.error.startswith("malformed node response")
    assert result.unplanned_retries == 0
    assert peer.connections == 1


async def test_oversize_output_is_a_failure_not_truncated() -> None:
    huge = FakeProvider("x" * (16 * 1024 + 1), 0.01)
    async with providers(huge) as peers:
        result = await _run(peers, _package())
    assert result.output is None
    assert "malformed node response: output.text" in result.error


async def test_provider_error_fails_the_node_and_is_still_charged() -> None:
    refusing = FakeProvider("", 0.02, error="subnet sn1 unavailable (attempt 1)")
    async with providers(refusing) as peers:
        result = await _run(peers, _package())
    assert result.output is None
    assert result.error == "subnet sn1 unavailable (attempt 1)"
    assert result.cost_tao == 0.02


async def test_one_failing_provider_does_not_fail_the_node_when_another_answers() -> None:
    fakes = FakeProvider("", 0.01, error="boom"), FakeProvider("good", 0.02)
    async with providers(*fakes) as peers:
        result = await _run(peers, _package(default=RoutingRule(top_k=2)))
    assert result.output is not None and result.output.text == "good"
    assert result.cost_tao == 0.03


async def test_all_providers_failing_names_each_failure() -> None:
    fakes = FakeProvider("", error="first down"), FakeProvider("", error="second down")
    async with providers(*fakes) as peers:
        result = await _run(peers, _package(default=RoutingRule(top_k=2)))
    assert result.output is None
    assert result.error == "uid 0: first down; uid 1: second down"


async def test_no_provider_for_a_subnet_is_a_clean_failure() -> None:
    async with MinerClient(VALIDATOR) as client:
        runner = RemoteRunner(client, lambda subnet: [], _package())
        result = await runner.run(_call("sn9"))
    assert result.output is None and result.error == "no provider for subnet sn9"


def test_every_peer_serves_rotates_by_offset() -> None:
    peers = [Peer(i, f"hk{i}", f"http://h{i}") for i in range(3)]
    assert [p.uid for p in every_peer_serves(peers, offset=4)("sn1")] == [1, 2, 0]
    assert list(every_peer_serves([])("sn1")) == []
