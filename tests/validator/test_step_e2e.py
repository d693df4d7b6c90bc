"""One validation step over HTTP: real uvicorn miners, real signatures, real executor and scorer.

The honest miners run the reference planners; a separate miner app plays the tool
provider of every subnet (priced by the task's ``available_tools``). Misbehaving
miners each get 0 with a reason, and leave the honest miners' outcomes as they were.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

from engine.executor import ExecutorConfig
from miner.app import create_app
from miner.metagraph import StaticMetagraph
from miner.serving import EVERY_TOOL
from miner.settings import MinerSettings
from neurons.localrun import family_task
from planners import load_planner
from planners.base import PlanProposal
from protocol.metagraph import MetagraphSnapshot, Peer
from protocol.plan import Edge, PlanNode, WorkflowPlan
from protocol.synapse import TaskPackage
from protocol.task import Task
from scoring.evaluate import score_run
from subnets.registry import default_registry
from support.keys import Keypair, MetagraphBuilder, dev_keypair
from support.peers import CLOSE, GARBAGE, HANG, raw_peer, serve_asgi
from validator.client import ClientConfig, MinerClient
from validator.errors import PeerClosed, PeerOversize, PeerTimeout
from validator.observation import observe_outcome
from validator.prometheus import ValidatorMetrics
from validator.remote import RemoteRunner, every_peer_serves
from validator.validation import StepResult, validation_step

pytestmark = pytest.mark.e2e


TASK_ID = "code_fizzbuzz"
"""A v2 family with a roomy latency budget (loopback HTTP on a busy machine) whose
flaky subnet separates a plan with declared retries from one without."""
HIDDEN = 2718
"""The seed of the instance the step sends and scores (not the public example)."""

VALIDATOR = dev_keypair("Alice")
PROVIDER = dev_keypair("dagnet-step-provider")
HONEST = {"good": dev_keypair("dagnet-step-good"), "naive": dev_keypair("dagnet-step-naive")}
TWIN = dev_keypair("dagnet-step-good-twin")
BOMBER = dev_keypair("dagnet-step-digit-bomb")
QUERY_TIMEOUT_S = 2.0


class _ShapedPlanner:
    """A planner whose plans are well-formed JSON but break one rule."""

    name = "shaped"

    def __init__(self, shape: str) -> None:
        self.shape = shape

    def plan(self, package: TaskPackage) -> PlanProposal:
        subnet = (package.constraints.allowed_subnets or sorted(package.available_tools))[0]
        if self.shape == "cyclic":
            nodes = [PlanNode(id=i, subnet=subnet, action="echo") for i in ("a", "b")]
            plan = WorkflowPlan(nodes=nodes, edges=[Edge(source="a", to="b"), Edge(source="b", to="a")])
        elif self.shape == "too_many_nodes":
            plan = WorkflowPlan(nodes=[PlanNode(id=f"n{i}", subnet=subnet, action="echo") for i in range(300)])
        elif self.shape == "digit_bomb":  # the good plan, its last node given a 4,301-digit index
            good = load_planner("good").plan(package)
            *rest, last = good.plan.nodes
            bomb = "${" + rest[0].id + ".output." + "9" * 4_301 + "}"
            params = {key: bomb if isinstance(value, str) else value for key, value in last.params.items()}
            plan = good.plan.model_copy(update={"nodes": [*rest, last.model_copy(update={"params": params})]})
        else:  # oversize: a response body over the 1 MiB limit
            params = {"text": "x" * 8_000}
            plan = WorkflowPlan(
                nodes=[PlanNode(id=f"n{i}", subnet=subnet, action="echo", params=params) for i in range(200)]
            )
        return PlanProposal(plan, 0.01, 0.1, 0.5, f"a {self.shape} plan")


SHAPED = {shape: dev_keypair(f"dagnet-step-{shape}") for shape in ("cyclic", "too_many_nodes", "oversize")}


def _snapshot() -> MetagraphSnapshot:
    builder = MetagraphBuilder(netuid=7).validator(VALIDATOR, stake=1_000.0).miner(PROVIDER)
    for key in [*HONEST.values(), TWIN, BOMBER, *SHAPED.values()]:
        builder.miner(key)
    return builder.build()


@contextlib.asynccontextmanager
async def _app(key: Keypair, planner: object, snapshot: MetagraphSnapshot, task: Task) -> AsyncIterator[Peer]:
    settings = MinerSettings(port=0, serve=EVERY_TOOL, provider_subnets=task.available_tools)
    app = create_app(
        settings, keypair=key, metagraph=StaticMetagraph(snapshot), registry=default_registry(), planner=planner
    )
    async with serve_asgi(app) as url:
        neuron = snapshot.by_hotkey(key.ss58_address)
        yield Peer(uid=neuron.uid, hotkey=key.ss58_address, url=url)


async def _step(task: Task, miners: list[Peer], provider: Peer) -> StepResult:
    async with MinerClient(VALIDATOR, config=ClientConfig(timeout_s=QUERY_TIMEOUT_S)) as client:
        return await validation_step(
            task=task,
            miners=miners,
            client=client,
            runner_factory=lambda package, miner: RemoteRunner(client, every_peer_serves([provider]), package),
            executor_config=ExecutorConfig(),
            exec_concurrency=4,
        )


@contextlib.asynccontextmanager
async def _network(task: Task) -> AsyncIterator[tuple[Peer, dict[str, Peer], dict[str, Peer]]]:
    """The provider, the honest miners and every misbehaving miner, all listening."""
    snapshot = _snapshot()
    async with contextlib.AsyncExitStack() as stack:
        enter = stack.enter_async_context
        provider = await enter(_app(PROVIDER, load_planner("good"), snapshot, task))
        honest = {name: await enter(_app(key, load_planner(name), snapshot, task)) for name, key in HONEST.items()}
        bad = {shape: await enter(_app(key, _ShapedPlanner(shape), snapshot, task)) for shape, key in SHAPED.items()}
        for name, behaviour in (("hanging", HANG), ("garbage", GARBAGE), ("closing", CLOSE)):
            peer = await enter(raw_peer(behaviour))
            bad[name] = Peer(uid=100 + len(bad), hotkey=dev_keypair(f"dagnet-step-{name}").ss58_address, url=peer.url)
        yield provider, honest, bad


@pytest.fixture
def task() -> Task:
    return family_task(TASK_ID, HIDDEN)


async def test_good_strategy_outscores_naive_over_http(task: Task) -> None:
    async with _network(task) as (provider, honest, _):
        result = await _step(task, [honest["good"], honest["naive"]], provider)
    good, naive = result.outcomes
    assert good.reason is None and naive.reason is None
    assert good.execution is not None and good.execution.status == "completed"
    assert good.score.S > naive.score.S
    assert good.score.S_success > naive.score.S_success  # not only faster: it completes
    assert result.task_id == task.task_id
    assert result.timings.wall_s >= result.timings.query_s + result.timings.execute_s


_DETERMINISTIC = ("S_success", "S_cost", "S_reliability", "output_quality", "completion_ratio")


async def test_misbehaving_miners_score_zero_with_a_reason_and_leave_honest_ones_alone(task: Task) -> None:
    async with _network(task) as (provider, honest, bad):
        alone = await _step(task, list(honest.values()), provider)
        crowded = await _step(task, [*honest.values(), *bad.values()], provider)
    by_uid = {outcome.uid: outcome for outcome in crowded.outcomes}
    reasons = {name: by_uid[peer.uid].reason for name, peer in bad.items()}
    for name, peer in bad.items():
        assert by_uid[peer.uid].score.S == 0, name
        assert by_uid[peer.uid].execution is None, name
    assert reasons["hanging"] == f"query failed: timeout after {QUERY_TIMEOUT_S:g}s"
    assert reasons["closing"].startswith("query failed: connection closed")
    assert reasons["oversize"].startswith("query failed: response over 1048576 bytes")
    assert "cycle: a -> b -> a" in reasons["cyclic"]
    assert "300" in reasons["too_many_nodes"] and "256" in reasons["too_many_nodes"]
    assert reasons["garbage"] and "json" in reasons["garbage"].lower()
    failures = {name: type(by_uid[peer.uid].failure) for name, peer in bad.items()}
    assert (failures["hanging"], failures["closing"], failures["oversize"]) == (PeerTimeout, PeerClosed, PeerOversize)
    assert failures["cyclic"] is failures["garbage"] is type(None)  # they answered; the answer was wrong
    metrics = ValidatorMetrics()
    for outcome in crowded.outcomes:
        observe_outcome(metrics, outcome, task)
    assert metrics.timeouts.labels("query")._value.get() == 1  # the hanging miner's, read from its type

    for before, after in zip(alone.outcomes, crowded.outcomes[: len(honest)]):
        assert after.reason is None and after.uid == before.uid
        for field in _DETERMINISTIC:  # latency is wall-clock, everything else must not move
            assert getattr(after.score, field) == getattr(before.score, field), field
        assert after.execution.metrics.cost_tao == before.execution.metrics.cost_tao


async def test_every_honest_miner_is_scored_while_one_sends_a_digit_bomb(task: Task) -> None:
    snapshot = _snapshot()
    async with (
        _network(task) as (provider, honest, _),
        _app(BOMBER, _ShapedPlanner("digit_bomb"), snapshot, task) as bomber,
    ):
        result = await _step(task, [*honest.values(), bomber], provider)
    *fair, bombed = result.outcomes
    for outcome in fair:  # scored on their own merits (the naive plan may still earn 0)
        assert outcome.reason is None and outcome.execution is not None
    assert fair[0].score.S > 0
    assert bombed.execution is not None  # the plan ran, with the bombed node blocked
    blocked = [r.reason for r in bombed.execution.nodes.values() if r.status == "blocked"]
    assert any(reason.startswith("bad_dataref:invalid DataRef syntax") for reason in blocked), blocked


async def test_miners_with_the_same_output_get_exactly_what_score_run_gives_each(task: Task) -> None:
    snapshot = _snapshot()
    async with _network(task) as (provider, honest, _), _app(TWIN, load_planner("good"), snapshot, task) as twin:
        result = await _step(task, [honest["good"], twin], provider)
    first, second = result.outcomes
    assert first.execution.final_output == second.execution.final_output
    for outcome in result.outcomes:
        direct = score_run(task, metrics=outcome.execution.metrics, final_output=outcome.execution.final_output)
        assert outcome.score == direct


async def test_an_empty_step_is_an_empty_result(task: Task) -> None:
    async with MinerClient(VALIDATOR) as client:
        result = await validation_step(task=task, miners=[], client=client, runner_factory=lambda p, m: None)
    assert result.outcomes == [] and result.scores() == {}
