"""What the miner's routes answer to a signed validator, and that it survives anything else."""

from __future__ import annotations

import asyncio
import json
import random

from miner.serving import EVERY_TOOL
from miner.settings import MinerSettings
from planners.base import PlanningError
from protocol.response import check_response
from protocol.synapse import SCORING_VERSION, NodeResponse, TaskPackage
from support.keys import MetagraphBuilder, dev_keypair
from support.miner import MinerUnderTest, running_miner

PACKAGE = TaskPackage(
    task_id="task-42",
    task_type="rag",
    description="say hello",
    constraints={"max_budget_tao": 1.0, "max_latency_seconds": 10.0, "allowed_subnets": ["sn7"]},
    available_tools={"sn7": {"type": "text", "avg_cost": 0.001, "avg_latency": 0.0}},
)


class Refuses:
    name = "refuses"

    def plan(self, package):
        raise PlanningError("no subnet of kind 'vision'")


class Crashes:
    name = "crashes"

    def plan(self, package):
        raise RuntimeError("boom")


def _node(**overrides) -> dict:
    return {"task_id": "t1", "node_id": "n1", "subnet": "sn1", "action": "echo", "params": {"text": "hi"}} | overrides


async def test_workflow_answer_passes_the_validators_check(miner_server: MinerUnderTest) -> None:
    response = await miner_server.post("/WorkflowSynapse", PACKAGE.model_dump(mode="json"))
    assert response.status_code == 200, response.text
    check = check_response(response.content, PACKAGE)
    assert check.ok, check.reason
    assert check.synapse.miner_uid == 1  # //Bob is uid 1 in the default metagraph
    assert check.synapse.scoring_version == SCORING_VERSION
    assert check.synapse.workflow_plan.nodes[0].params == {"op": "strip", "text": "say hello"}


async def test_workflow_needs_the_miner_in_the_metagraph() -> None:
    snapshot = MetagraphBuilder().validator(dev_keypair("Alice")).build()
    async with running_miner(snapshot=snapshot) as miner:
        response = await miner.post("/WorkflowSynapse", PACKAGE.model_dump(mode="json"))
    assert response.status_code == 503
    assert response.json()["reason"] == "miner_not_registered"


async def test_unplannable_task_is_422_with_the_planners_reason() -> None:
    async with running_miner(planner=Refuses()) as miner:
        response = await miner.post("/WorkflowSynapse", PACKAGE.model_dump(mode="json"))
    assert response.status_code == 422
    assert response.json()["reason"] == "unplannable"
    assert "vision" in response.json()["error"]


async def test_planner_crash_is_a_500_and_the_miner_keeps_serving() -> None:
    async with running_miner(planner=Crashes()) as miner:
        crashed = await miner.post("/WorkflowSynapse", PACKAGE.model_dump(mode="json"))
        after = await miner.post("/NodeSynapse", _node())
        metrics = (await miner.get("/metrics")).text
    assert crashed.status_code == 500
    assert crashed.json() == {"error": "the planner raised RuntimeError: boom", "reason": "planner_error"}
    assert after.status_code == 200
    assert 'dagnet_miner_requests_total{code="500",endpoint="/WorkflowSynapse"} 1.0' in metrics
    assert 'dagnet_miner_planner_failures_total{kind="error"} 1.0' in metrics


async def test_malformed_json_is_422_with_a_clear_message(miner_server: MinerUnderTest) -> None:
    response = await miner_server.post("/WorkflowSynapse", b'{"task_id": "t", ')
    assert response.status_code == 422
    assert response.json()["reason"] == "malformed_json"
    assert "not valid JSON" in response.json()["error"]


async def test_schema_violation_names_the_field(miner_server: MinerUnderTest) -> None:
    bad = PACKAGE.model_dump(mode="json")
    bad["constraints"]["max_budget_tao"] = -1
    response = await miner_server.post("/WorkflowSynapse", bad)
    assert response.status_code == 422
    payload = response.json()
    assert payload["reason"] == "schema"
    assert "constraints.max_budget_tao" in payload["error"]
    assert payload["errors"][0]["loc"] == "constraints.max_budget_tao"


async def test_node_schema_violation_names_the_field(miner_server: MinerUnderTest) -> None:
    response = await miner_server.post("/NodeSynapse", _node(timeout_seconds=0))
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == "timeout_seconds"


async def test_node_id_follows_the_rule_of_plan_node_ids(miner_server: MinerUnderTest) -> None:
    response = await miner_server.post("/NodeSynapse", _node(node_id="n 1"))
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == "node_id"


async def test_node_echo_returns_its_output(miner_server: MinerUnderTest) -> None:
    params = {"text": "hello", "code": "print(1)", "metadata": {"k": [1, 2]}, "cost": 0.25}
    response = await miner_server.post("/NodeSynapse", _node(params=params))
    assert response.status_code == 200
    answer = NodeResponse.model_validate_json(response.content)
    assert answer.error is None
    assert answer.output.as_dict() == {"text": "hello", "artifacts": {"code": "print(1)", "metadata": {"k": [1, 2]}}}
    assert answer.cost_tao == 0.25


async def test_node_params_are_not_resolved(miner_server: MinerUnderTest) -> None:
    response = await miner_server.post("/NodeSynapse", _node(params={"text": "${a.output.text}"}))
    assert response.json()["output"]["text"] == "${a.output.text}"


async def test_node_failures_are_answers_not_errors(miner_server: MinerUnderTest) -> None:
    unknown = await miner_server.post("/NodeSynapse", _node(action="teleport"))
    planned = await miner_server.post("/NodeSynapse", _node(params={"fail_first": 1, "cost": 0.5}))
    assert unknown.status_code == planned.status_code == 200
    assert unknown.json()["output"] is None and "teleport" in unknown.json()["error"]
    assert planned.json()["output"] is None and planned.json()["cost_tao"] == 0.5
    metrics = (await miner_server.get("/metrics")).text
    assert 'dagnet_miner_node_calls_total{action="unknown",outcome="error"} 1.0' in metrics
    assert 'dagnet_miner_node_calls_total{action="echo",outcome="error"} 1.0' in metrics


async def test_node_is_bounded_by_its_timeout(miner_server: MinerUnderTest) -> None:
    response = await miner_server.post("/NodeSynapse", _node(params={"delay_s": 30}, timeout_seconds=0.05))
    assert response.status_code == 200
    assert response.json()["output"] is None
    assert "timed out" in response.json()["error"]


async def test_provider_subnets_price_the_node() -> None:
    settings = MinerSettings(serve=EVERY_TOOL, provider_subnets={"sn1": {"type": "text", "avg_cost": 0.1}})
    async with running_miner(settings=settings) as miner:
        served = await miner.post("/NodeSynapse", _node(params={"cost": 0.2}))
        foreign = await miner.post("/NodeSynapse", _node(subnet="sn9"))
    assert served.json()["cost_tao"] == 0.1 + 0.2
    assert foreign.json()["output"] is None and "sn9" in foreign.json()["error"]


async def test_health_reports_identity(miner_server: MinerUnderTest) -> None:
    response = await miner_server.get("/health")
    assert response.status_code == 200
    health = response.json()
    assert health["status"] == "ok"
    assert health["hotkey"] == dev_keypair("Bob").ss58_address
    assert health["uid"] == 1
    assert health["scoring_version"] == SCORING_VERSION
    assert health["version"]


async def test_metrics_are_prometheus_text(miner_server: MinerUnderTest) -> None:
    await miner_server.post("/NodeSynapse", _node())
    response = await miner_server.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    assert 'dagnet_miner_requests_total{code="200",endpoint="/NodeSynapse"} 1.0' in response.text
    assert 'dagnet_miner_node_calls_total{action="echo",outcome="success"} 1.0' in response.text
    assert 'dagnet_miner_request_latency_seconds_count{endpoint="/NodeSynapse"} 1.0' in response.text


async def test_two_apps_in_one_process_keep_separate_metrics() -> None:
    async with running_miner() as first, running_miner() as second:
        await first.post("/NodeSynapse", _node())
        text = (await second.get("/metrics")).text
    assert 'endpoint="/NodeSynapse"' not in text


async def test_auth_can_be_switched_off() -> None:
    async with running_miner(auth_enabled=False, snapshot=None) as miner:
        response = await miner.client.post(miner.url + "/NodeSynapse", json=_node())
    assert response.status_code == 200
    assert response.json()["output"]["text"] == "hi"


async def _send_raw(url: str, payload: bytes) -> None:
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(payload)
        await writer.drain()
        writer.write_eof()
        await asyncio.wait_for(reader.read(), timeout=5)
    except (TimeoutError, ConnectionError):
        pass
    finally:
        writer.close()


def _garbage(rng: random.Random) -> list[bytes]:
    junk = [bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 4096))) for _ in range(12)]
    return junk + [
        b"POST /NodeSynapse HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
        b"POST /NodeSynapse HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n{}",
        b"POST /NodeSynapse HTTP/1.1\r\nHost: x\r\n" + b"X-Bittensor-Nonce: " + b"9" * 60000 + b"\r\n\r\n",
        b"POST /NodeSynapse HTTP/1.1\r\nHost: x\r\nX-Bittensor-Version: 1\r\nX-Bittensor-Hotkey: \xff\xfe\r\n"
        b"X-Bittensor-Nonce: abc\r\nX-Bittensor-Signature: zz\r\nContent-Length: 2\r\n\r\n{}",
        b"GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS ClientHello
        b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\n\r\n",
    ]


async def test_server_survives_garbage(miner_server: MinerUnderTest) -> None:
    payloads = _garbage(random.Random(1234))
    await asyncio.gather(*(_send_raw(miner_server.url, p) for p in payloads))
    garbage_headers = {
        "X-Bittensor-Version": "1",
        "X-Bittensor-Hotkey": "nothex",
        "X-Bittensor-Nonce": "1",
        "X-Bittensor-Signature": "0x00",
        "X-Bittensor-Receiver": miner_server.keypair.ss58_address,
    }
    odd = await miner_server.post("/NodeSynapse", b"\x00\xff", headers=garbage_headers)
    assert odd.status_code == 401
    response = await miner_server.post("/NodeSynapse", _node())
    assert response.status_code == 200
    assert response.json()["output"]["text"] == "hi"


async def test_non_object_bodies_are_422(miner_server: MinerUnderTest) -> None:
    for body in (b"[]", b"null", b"42", json.dumps({"a": [[[[[[[[1]]]]]]]]}).encode(), b"\xff\xfe"):
        response = await miner_server.post("/NodeSynapse", body)
        assert response.status_code == 422, body
