"""External providers are untrusted (validator/adapters.py): the self-dealing attack of issue 17.

A miner that also runs the top-staked provider of a partner subnet answers with a
one-node plan carrying every ``${input.*}`` of the task; its provider "solves" the
hidden instance from those inputs (it runs the good plan on them, as any cheater can)
and charges nothing. Without the trust rules that plan beats the good planner; with
them it scores no more than the good plan, whether the provider shares the miner's
coldkey (it is never asked) or has unrelated keys (its answer fails the validator's
re-run), nor with a second colluding provider agreeing with the first (agreement is
not evidence). A provider that fails every competitor's node cannot sink the good
miner when it is excluded (its hotkey is registered on the validator's netuid) or
out-answered (an honest provider among ``top_k`` gives the re-run's answer), and one
that answers late cannot slow it (a node ends with the first confirmed answer).

Everything here is a real step of a :class:`ValidatorLoop` against signed HTTP
miners and providers on loopback, as ``tests/miner/test_network_fidelity.py`` runs one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from engine.owned import CPU_EXHAUSTED, OwnedLimits
from engine.simclock import run_simulated
from miner.app import create_app
from miner.metagraph import StaticMetagraph
from miner.serving import EVERY_TOOL
from miner.settings import MinerSettings
from neurons.localrun import family_task, run_document
from planners import load_planner
from protocol.documents import load_plan_document
from protocol.metagraph import Axon, MetagraphSnapshot, Neuron, Peer
from protocol.output import NodeOutput
from protocol.plan import PlanNode, WorkflowPlan
from protocol.runner import NodeCall, NodeResult
from protocol.synapse import RoutingRule, TaskPackage, ToolInfo
from protocol.task import Task
from subnets.owned import owned_runner
from subnets.registry import default_registry
from subnets.runner import LocalRunner
from support.fakechain import FakeChain
from support.keys import dev_keypair
from support.peers import axon, serve_asgi
from support.tasks import SomeFamilies, provider_profiles
from validator.adapters import AdapterRunner, settle, trusted_selector
from validator.client import ClientConfig, MinerClient, Reply
from validator.loop import LoopConfig, ValidatorLoop
from validator.providers import FixedProviders, MetagraphProviders, Provider
from validator.remote import RemoteRunner, every_peer_serves
from validator.sampling import FixedTasks
from validator.state import ValidatorState
from validator.validation import validation_step

FAMILY = "agent_invoice"
"""An agent family with a roomy latency limit (2.6 s) for loopback HTTP, whose inputs are
its data (a family with held data would hand the cheat's node only an id)."""
PARTNER_NETUID = 12
UNMOVED = ("S_success", "S_cost", "S_reliability", "output_quality", "completion_ratio")
"""The parts of a score no machine load can move. A run through an adapter is on the wall
clock, so its latency term (and S with it) depends on how busy the machine is; every
other part must be exactly what owned execution gives."""
SOLVE = "solve"
VALIDATOR = dev_keypair("Alice")
GOOD = dev_keypair("dagnet-trust-good")
CHEAT = dev_keypair("dagnet-trust-cheat")
CHEAT_PROVIDER = dev_keypair("dagnet-trust-cheat-provider")
COLLUDER = dev_keypair("dagnet-trust-colluder")
HONEST = (dev_keypair("dagnet-trust-honest-0"), dev_keypair("dagnet-trust-honest-1"))
CHEAT_COLDKEY, OTHER_COLDKEY = "5CheatColdkey", "5SomeoneElse"


class CheatPlanner:
    """One node that hands a provider every input of the task; its output is the answer.
    The node goes to the fastest subnet that asks a single provider: the cheat's own (a
    text subnet, given the inputs as a template's values)."""

    name = "cheat"

    def plan(self, package: TaskPackage) -> WorkflowPlan:
        data = {name: f"${{input.{name}}}" for name in package.example}
        tools = package.available_tools
        text = [s for s in tools if tools[s].type == "text"]
        subnet = min(text, key=lambda s: (package.route(s).top_k, tools[s].avg_latency))
        params = {"op": "template", "text": " ".join(f"{{{name}}}" for name in data), "values": data}
        return WorkflowPlan(nodes=[PlanNode(id=SOLVE, subnet=subnet, action="text_transform", params=params)])


@dataclass
class CheatProvider:
    """The cheater's provider: solves the cheat's node from its inputs (it runs the good
    plan on them) at no charge; on every other node it is honest, or fails (``sabotage``),
    or answers honestly but only once ``released`` (``late``: the network sets it as it
    closes, so the answer comes after the step)."""

    sabotage: bool = False
    late: bool = False
    calls: list[str] = field(default_factory=list)
    released: asyncio.Event = field(default_factory=asyncio.Event)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/NodeSynapse", self._node, methods=["POST"])])

    async def _node(self, request: Request) -> Response:
        body = json.loads(await request.body())
        self.calls.append(body["node_id"])
        if body["node_id"] == SOLVE:
            return JSONResponse({"output": await _solve(body["task_id"], body["params"]["values"]), "cost_tao": 0.0})
        if self.sabotage:
            return JSONResponse({"output": None, "cost_tao": 0.0, "error": "subnet busy"})
        if self.late:
            await self.released.wait()
        task = family_task(body["task_id"], 0)
        result = await LocalRunner(default_registry(), subnets=task.available_tools).run(
            NodeCall(
                task_id=body["task_id"],
                node_id=body["node_id"],
                subnet=body["subnet"],
                action=body["action"],
                params=body["params"],
                timeout_seconds=body["timeout_seconds"],
                attempt=body["attempt"],
            )
        )
        output = None if result.output is None else result.output.model_dump(mode="json", exclude_none=True)
        return JSONResponse({"output": output, "cost_tao": result.cost_tao, "error": result.error})


async def _solve(task_id: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """The instance's answer from its inputs: the good plan for the public package, run on them."""
    report = await run_document(_good_document(family_task(task_id, 0)), inputs=inputs)
    return report["final_output"]


def _good_document(task: Task) -> Any:
    answer = load_planner("good").plan(task.package()).answer(task.package(), miner_uid=1)
    return load_plan_document(answer.model_dump(mode="json", by_alias=True, exclude_none=True))


class Routed(SomeFamilies):
    """The family with every subnet asked ``top_k`` providers at once, and the budget to pay them."""

    def __init__(self, top_k: int) -> None:
        super().__init__(FAMILY)
        self.top_k = top_k

    def _routed(self, task: Task) -> Task:
        budget = task.constraints.max_budget_tao * self.top_k
        return task.model_copy(
            update={
                "routing_policy": {"default": RoutingRule(top_k=self.top_k)},
                "constraints": task.constraints.model_copy(update={"max_budget_tao": budget}),
            }
        )

    def tasks(self) -> tuple[Task, ...]:
        return tuple(self._routed(task) for task in super().tasks())

    def instance(self, task: Task, seed: int) -> Task:
        return self._routed(super().instance(task, seed))


@dataclass
class Network:
    """The validator's netuid (validator, good miner, cheat miner) and the partner subnet's providers."""

    own: MetagraphSnapshot
    partner: MetagraphSnapshot
    cheat_provider: CheatProvider


# A step over this network is an e2e test: real HTTP servers, miners planning in forked
# processes, providers sleeping each subnet's advertised latency in real time (seconds a step).
@contextlib.asynccontextmanager
async def _network(
    *,
    provider_hotkey: str,
    provider_coldkey: str,
    sabotage: bool = False,
    late: bool = False,
    colluder: bool = False,
) -> AsyncIterator[Network]:
    """``colluder``: a second provider, ranked just below the first and with unrelated keys,
    that answers as the cheat's provider does."""
    served = (GOOD, CHEAT, *HONEST)  # each app serves only while it sees its own hotkey registered
    bare = MetagraphSnapshot(
        7,
        100,
        (
            Neuron(0, VALIDATOR.ss58_address, 1_000.0, True),
            *(Neuron(i + 1, key.ss58_address) for i, key in enumerate(served)),
        ),
    )
    profiles = provider_profiles(SomeFamilies(FAMILY).tasks())
    cheat_provider = CheatProvider(sabotage=sabotage, late=late)
    async with contextlib.AsyncExitStack() as stack:

        async def serve(key: Any, **settings: Any) -> Axon:
            planner = CheatPlanner() if key is CHEAT else load_planner("good")
            app = create_app(
                MinerSettings(port=0, serve=EVERY_TOOL, **settings),
                keypair=key,
                metagraph=StaticMetagraph(bare),
                registry=default_registry(),
                planner=planner,
            )
            return axon(await stack.enter_async_context(serve_asgi(app)))

        own = MetagraphSnapshot(
            7,
            100,
            (
                Neuron(0, VALIDATOR.ss58_address, 1_000.0, True, coldkey="5ValidatorColdkey"),
                Neuron(1, GOOD.ss58_address, 10.0, axon=await serve(GOOD), coldkey="5GoodColdkey"),
                Neuron(2, CHEAT.ss58_address, 10.0, axon=await serve(CHEAT), coldkey=CHEAT_COLDKEY),
            ),
        )
        cheat_axon = axon(await stack.enter_async_context(serve_asgi(cheat_provider.app())))
        stack.callback(cheat_provider.released.set)  # before its server stops: a late answer comes now
        honest = [
            Neuron(
                i + 1,
                key.ss58_address,
                100.0 - i,
                axon=await serve(key, provider_tasks=profiles),
                coldkey=f"5HonestColdkey{i}",
            )
            for i, key in enumerate(HONEST)
        ]
        top = [
            Neuron(0, provider_hotkey, 5_000.0, axon=cheat_axon, coldkey=provider_coldkey)
        ]  # the top-staked provider
        if colluder:
            top.append(
                Neuron(len(HONEST) + 1, COLLUDER.ss58_address, 4_000.0, axon=cheat_axon, coldkey="5ColluderColdkey")
            )
        partner = MetagraphSnapshot(PARTNER_NETUID, 100, (*top, *honest))
        yield Network(own, partner, cheat_provider)


async def _step(network: Network, tmp_path: Path, source: SomeFamilies) -> dict[str, dict[str, Any]]:
    """One step of a validator whose adapters send every subnet to the partner netuid's
    providers; each miner's record by name."""

    async def read(netuid: int) -> MetagraphSnapshot:
        assert netuid == PARTNER_NETUID
        return network.partner

    chain = FakeChain(hotkey=VALIDATOR.ss58_address, snapshot=network.own)
    tmp_path.mkdir(parents=True, exist_ok=True)
    state = ValidatorState(tmp_path / "validator.sqlite")
    try:
        async with MinerClient(VALIDATOR, config=ClientConfig(timeout_s=5.0)) as client:
            providers = MetagraphProviders(read, PARTNER_NETUID)
            loop = ValidatorLoop(
                chain,
                state,
                client,
                source,
                providers,
                owned_runner=owned_runner,
                config=LoopConfig(synthetic_rate=0.0),
            )
            assert await loop.step(chain.head) is not None
        names = {GOOD.ss58_address: "good", CHEAT.ss58_address: "cheat"}
        return {names[record.hotkey]: dataclasses.asdict(record) for record in state.executions()}
    finally:
        state.close()


async def _owned_score(record: dict[str, Any]) -> dict[str, Any]:
    """What owned execution gives the good plan on the record's instance (``dagnet run --task``)."""
    task = family_task(FAMILY, record["instance_seed"])
    return (await run_document(_good_document(task), task=task))["score"]


def _unmoved(score: dict[str, Any]) -> dict[str, float]:
    return {part: round(score[part], 9) for part in UNMOVED}


@pytest.mark.e2e
async def test_without_the_trust_rules_the_self_dealing_plan_wins() -> None:
    """The attack is real in this harness: taken at its word, the cheat's provider makes a
    one-node plan beat the good planner (the untrusted runner, as main had it)."""
    task = family_task(FAMILY, 4242)
    async with _network(
        provider_hotkey=CHEAT_PROVIDER.ss58_address, provider_coldkey=OTHER_COLDKEY, sabotage=False
    ) as network:
        miners = [Peer.from_neuron(n) for n in network.own.neurons if n.axon is not None]
        cheat = [Peer.from_neuron(network.partner.neurons[0])]
        async with MinerClient(VALIDATOR, config=ClientConfig(timeout_s=5.0)) as client:
            result = await validation_step(
                task=task,
                miners=miners,
                client=client,
                runner_factory=lambda package, _: RemoteRunner(client, every_peer_serves(cheat), package),
            )
    good, cheat_outcome = result.outcomes
    assert network.cheat_provider.calls.count(SOLVE) == 1
    assert cheat_outcome.score.output_quality == 1.0 and cheat_outcome.execution.metrics.cost_tao == 0.0
    assert cheat_outcome.score.S > good.score.S > 0.5


@pytest.mark.e2e
@pytest.mark.parametrize("keys", ["same_coldkey", "unrelated_keys"])
async def test_self_dealing_scores_no_more_than_the_good_plan(tmp_path: Path, keys: str) -> None:
    coldkey = CHEAT_COLDKEY if keys == "same_coldkey" else OTHER_COLDKEY
    async with _network(
        provider_hotkey=CHEAT_PROVIDER.ss58_address, provider_coldkey=coldkey, sabotage=False
    ) as network:
        records = await _step(network, tmp_path, SomeFamilies(FAMILY))
    good, cheat = records["good"], records["cheat"]
    assert good["score"]["S"] > 0.5 and good["metrics"]["clock"] == "wall"
    assert cheat["score"]["S"] <= good["score"]["S"]
    assert cheat["score"]["output_quality"] < 1.0
    if keys == "same_coldkey":
        assert SOLVE not in network.cheat_provider.calls  # never asked to serve its owner's plan
    else:
        assert network.cheat_provider.calls.count(SOLVE) >= 1  # asked, and its answer failed the re-run
        assert cheat["final_output"] is None and cheat["metrics"]["completion_ratio"] == 0.0
    assert _unmoved(good["score"]) == _unmoved(await _owned_score(good))


@pytest.mark.e2e
@pytest.mark.parametrize("guard", ["excluded", "out_voted"])
async def test_a_provider_failing_competitors_cannot_sink_the_good_miner(tmp_path: Path, guard: str) -> None:
    """Excluded: the provider runs under the cheat miner's own hotkey, registered on the
    validator's netuid, so it serves nobody. Out-voted: unrelated keys, every subnet asks
    three providers, and the honest ones give the re-run's answer."""
    if guard == "excluded":
        context = _network(provider_hotkey=CHEAT.ss58_address, provider_coldkey=CHEAT_COLDKEY, sabotage=True)
        source: SomeFamilies = SomeFamilies(FAMILY)
    else:
        context = _network(provider_hotkey=CHEAT_PROVIDER.ss58_address, provider_coldkey=OTHER_COLDKEY, sabotage=True)
        source = Routed(top_k=3)
    async with context as network:
        records = await _step(network, tmp_path, source)
    good, cheat = records["good"], records["cheat"]
    assert good["metrics"]["completion_ratio"] == 1.0 and good["score"]["output_quality"] == 1.0
    assert cheat["score"]["S"] <= good["score"]["S"]
    if guard == "excluded":
        assert network.cheat_provider.calls == []
        assert _unmoved(good["score"]) == _unmoved(await _owned_score(good))
    else:
        assert set(network.cheat_provider.calls) - {SOLVE}  # it was asked for the good plan's nodes, and failed them
        async with _network(
            provider_hotkey=CHEAT_PROVIDER.ss58_address, provider_coldkey=OTHER_COLDKEY, sabotage=False
        ) as honest:
            control = (await _step(honest, tmp_path / "control", source))["good"]
        assert control["score"]["S"] > 0.5
        assert _unmoved(good["score"]) == _unmoved(control["score"])  # as if every provider were honest


@pytest.mark.e2e
async def test_two_colluding_providers_agreeing_gain_the_cheat_nothing(tmp_path: Path) -> None:
    """Every subnet asks two providers, and both are the cheater's (unrelated keys): they
    agree on the solved instance. Agreement is not evidence; the re-run refuses it."""
    async with _network(
        provider_hotkey=CHEAT_PROVIDER.ss58_address, provider_coldkey=OTHER_COLDKEY, colluder=True
    ) as network:
        records = await _step(network, tmp_path, Routed(top_k=2))
    good, cheat = records["good"], records["cheat"]
    assert network.cheat_provider.calls.count(SOLVE) == 2  # both asked, both agreed
    assert cheat["final_output"] is None and cheat["metrics"]["completion_ratio"] == 0.0
    assert cheat["score"]["S"] <= good["score"]["S"] and good["score"]["output_quality"] == 1.0


@pytest.mark.e2e
async def test_a_provider_answering_late_does_not_slow_the_good_miner(tmp_path: Path) -> None:
    """Every subnet asks three providers; the top one answers honestly, but only after the
    step. The good plan's nodes end with the first confirmed answer, as with honest providers."""
    source = Routed(top_k=3)
    async with _network(
        provider_hotkey=CHEAT_PROVIDER.ss58_address, provider_coldkey=OTHER_COLDKEY, late=True
    ) as network:
        good = (await _step(network, tmp_path, source))["good"]
    assert set(network.cheat_provider.calls) - {SOLVE}  # it was asked for the good plan's nodes
    async with _network(provider_hotkey=CHEAT_PROVIDER.ss58_address, provider_coldkey=OTHER_COLDKEY) as honest:
        control = (await _step(honest, tmp_path / "control", source))["good"]
    assert _unmoved(good["score"]) == _unmoved(control["score"]) and good["score"]["S_success"] == 1.0
    deadline = family_task(FAMILY, good["instance_seed"]).constraints.max_latency_seconds
    assert good["metrics"]["latency_s"] < deadline  # a node waiting for the late answer would run past it


# -- the rules one by one ---------------------------------------------------------------------


def _peer(uid: int) -> Peer:
    return Peer(uid, f"5Provider{uid}", f"http://p{uid}")


def _call(action: str = "json_transform") -> NodeCall:
    return NodeCall(task_id="t", node_id="n", subnet="sn1", action=action, params={}, timeout_seconds=1.0, attempt=1)


def _said(uid: int, text: str | None, cost: float = 0.0) -> tuple[Peer, NodeResult]:
    output = None if text is None else NodeOutput(text=text)
    return _peer(uid), NodeResult(output, cost, None if text is not None else "down", 0)


def _rerun(text: str | None) -> NodeResult:
    """The validator's re-run of the node: ``text``, or a failure (``None``)."""
    return NodeResult(None, error="bad params") if text is None else NodeResult(NodeOutput(text=text))


def test_agreeing_providers_are_not_evidence_and_the_price_is_the_validators() -> None:
    agreed = settle(
        _call(),
        [_said(1, "x", 9.0), _said(2, "x", 9.0), _said(3, "y")],
        price=0.25,
        aggregation="majority_vote",
        rerun_result=_rerun("other"),
    )
    assert agreed.output is None and "differs from the validator's re-run" in agreed.error
    assert agreed.cost_tao == 0.25


@pytest.mark.parametrize(
    ("answers", "local", "text", "error"),
    [
        ([_said(1, "x")], "x", "x", None),
        ([_said(1, "forged")], "x", None, "answer of provider uid 1 (5Provider1) differs from the validator's re-run"),
        ([_said(1, "x"), _said(2, "y")], "y", "y", None),
        ([_said(1, "x"), _said(2, None)], "x", "x", None),  # a failing provider does not block the answer
        ([_said(1, "x")], None, None, "the validator's re-run failed: bad params"),
        ([], None, None, "the validator's re-run failed: bad params"),  # decided before any provider answered
        ([_said(1, None), _said(2, None)], "x", None, "uid 1: down; uid 2: down"),
    ],
)
def test_a_deterministic_answer_counts_only_when_it_equals_the_rerun(answers, local, text, error) -> None:
    result = settle(_call(), answers, price=0.1, aggregation="majority_vote", rerun_result=_rerun(local))
    assert (result.output.text if result.output else None) == text
    assert result.error is None if error is None else error in result.error
    assert result.cost_tao == 0.1


def test_without_a_rerun_no_deterministic_answer_counts_and_llm_answers_are_voted() -> None:
    refused = settle(_call(), [_said(1, "x"), _said(2, "x")], price=0.0, aggregation="majority_vote")
    assert refused.output is None and "unconfirmed" in refused.error
    voted = settle(_call("llm"), [_said(1, "a"), _said(2, "b"), _said(3, "b")], price=0.0, aggregation="majority_vote")
    assert voted.output.text == "b"


# -- how long a node through top_k providers takes, on simulated time ------------------------------


@dataclass
class Timed:
    """A provider that answers ``text`` after ``delay_s`` simulated seconds (never, when ``None``)."""

    text: str
    delay_s: float | None


class TimedClient:
    """A client whose providers answer as :class:`Timed` says (providers' urls name them)."""

    def __init__(self, answers: dict[str, Timed]) -> None:
        self.answers = answers

    async def call_node(self, url: str, hotkey: str, synapse: Any, *, timeout_s: float | None = None) -> Reply:
        timed = self.answers[url]
        await (asyncio.sleep(timed.delay_s) if timed.delay_s is not None else asyncio.Event().wait())
        body = json.dumps({"output": {"text": timed.text}, "cost_tao": 0.0}).encode()
        return Reply(200, body, None, 0.0, url, hotkey)


class Instant:
    """The validator's re-run: ``text`` at once."""

    def __init__(self, text: str) -> None:
        self.text = text

    async def run(self, call: NodeCall) -> NodeResult:
        return NodeResult(NodeOutput(text=self.text))


def _timed(action: str, answers: list[Timed], *, rerun: str = "x", latency: float = 0.5) -> tuple[str | None, float]:
    """The node's output through ``top_k = len(answers)`` providers and the simulated
    seconds it took (bounded: 100 s stands for never)."""
    peers = [Peer(uid, f"5Provider{uid}", f"http://p{uid}") for uid in range(len(answers))]
    package = TaskPackage(
        task_id="t",
        task_type="agent",
        routing_policy={"default": RoutingRule(top_k=len(answers))},
        available_tools={"sn1": ToolInfo(type="model", avg_cost=0.1, avg_latency=latency)},
    )
    client = TimedClient({peer.url: answer for peer, answer in zip(peers, answers)})
    runner = AdapterRunner(
        client,
        lambda subnet: peers,
        package,
        serves=lambda subnet: True,
        local=None,  # type: ignore[arg-type]
        rerun=Instant(rerun),
    )

    async def run() -> tuple[str | None, float]:
        result = await asyncio.wait_for(runner.run(_call(action)), 100.0)
        return (result.output.text if result.output else None), asyncio.get_running_loop().time()

    return run_simulated(run())


def test_a_deterministic_node_ends_with_the_first_answer_equal_to_the_rerun() -> None:
    assert _timed("json_transform", [Timed("x", None), Timed("forged", 0.1), Timed("x", 0.3)]) == ("x", 0.3)
    assert _timed("json_transform", [Timed("x", 0.2), Timed("x", None)]) == ("x", 0.2)


def test_an_llm_node_votes_on_the_answers_in_by_the_subnets_latency() -> None:
    assert _timed("llm", [Timed("a", None), Timed("b", 0.1), Timed("b", 0.4)]) == ("b", 0.5)
    assert _timed("llm", [Timed("a", None), Timed("c", 0.8), Timed("b", 0.9)]) == (
        "c",
        0.8,
    )  # none in by 0.5: the first


class Burner:
    """The owned runner's tools: answer ``x`` after burning a little CPU."""

    async def run(self, call: NodeCall) -> NodeResult:
        started = time.thread_time()
        while time.thread_time() == started:
            pass
        return NodeResult(NodeOutput(text="x"))


async def test_the_validators_reruns_are_metered_per_plan(tmp_path: Path) -> None:
    """A plan's re-runs draw on owned execution's CPU allowance, each plan its own: once a
    plan has used it, its next re-run fails at once, and with it the node."""
    peer = Peer(5, "5Provider5", "http://p5")
    chain = FakeChain(hotkey=VALIDATOR.ss58_address, snapshot=MetagraphSnapshot(7, 1, ()))
    state = ValidatorState(tmp_path / "validator.sqlite")
    client = TimedClient({peer.url: Timed("x", 0.0)})
    loop = ValidatorLoop(
        chain,
        state,
        client,
        FixedTasks(()),
        FixedProviders([peer]),  # type: ignore[arg-type]
        owned_runner=lambda task: Burner(),
    )
    try:
        assert loop.stepper._owned is not None
        loop.stepper._owned = dataclasses.replace(loop.stepper._owned, limits=OwnedLimits(cpu_per_plan_s=1e-9))
        task = family_task(FAMILY, 1)
        build = loop.stepper._runner_factory(task, None)
        plan, other = (
            build(task.package(), Peer(1, "5Miner", "http://m")),
            build(task.package(), Peer(2, "5Rival", "http://r")),
        )
        call = _call()
        assert (await plan.run(call)).output == NodeOutput(text="x")
        refused = await plan.run(call)
        assert refused.output is None and CPU_EXHAUSTED in refused.error
        assert (await other.run(call)).output == NodeOutput(text="x")
    finally:
        state.close()


def test_the_selector_drops_the_validators_netuid_and_the_miners_own_keys() -> None:
    own = MetagraphSnapshot(
        7, 1, (Neuron(0, "5Validator"), Neuron(1, "5Miner", coldkey="5MinerCold"), Neuron(2, "5Rival"))
    )
    directory = FixedProviders(
        [
            Provider(Peer(10, "5Miner", "http://a")),  # the miner's own hotkey
            Provider(Peer(11, "5Rival", "http://b")),  # registered on the validator's netuid
            Provider(Peer(12, "5Sibling", "http://c"), coldkey="5MinerCold"),  # the miner's coldkey
            Provider(Peer(13, "5Stranger", "http://d"), coldkey="5Other"),
            Provider(Peer(14, "5Anonymous", "http://e")),
        ]
    )
    miner = Peer(1, "5Miner", "http://m")
    select = trusted_selector(directory, miner, miner_coldkey="5MinerCold", own=own)
    assert [p.uid for p in select("sn1")] == [13, 14]
    rival = trusted_selector(directory, Peer(2, "5Rival", "http://r"), miner_coldkey="", own=own)
    assert [p.uid for p in rival("sn1")] == [12, 13, 14]


# -- an openai adapter: the llm action on owned execution ---------------------------------------


async def test_an_openai_adapter_answers_llm_nodes_on_simulated_time(monkeypatch) -> None:
    """The endpoint is called from the simulated loop (a blocking call in line), and the
    node takes its profile's latency, not the HTTP round trip's."""
    import asyncio

    from fastapi import FastAPI

    from engine.owned import run_owned
    from neurons.settings import build_settings
    from neurons.validator import owned_runners
    from protocol.synapse import Constraints, ToolInfo
    from protocol.validation import check_plan_for
    from validator.settings import ValidatorSettings

    endpoint, seen = FastAPI(), []

    @endpoint.post("/v1/chat/completions")
    async def complete(body: dict) -> dict:
        seen.append(body)
        return {"choices": [{"message": {"content": f"{body['model']}: {body['messages'][-1]['content']}"}}]}

    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    task = Task(
        task_id="ask",
        task_type="agent",
        inputs=schema,
        example={"q": "hi"},
        instance_inputs={"q": "hello"},
        constraints=Constraints(max_budget_tao=1.0, max_latency_seconds=10.0, allowed_subnets=["sn21"]),
        available_tools={"sn21": ToolInfo(type="model", avg_cost=0.01, avg_latency=0.75)},
    )
    plan = WorkflowPlan(nodes=[PlanNode(id="ask", subnet="sn21", action="llm", params={"prompt": "${input.q}"})])
    monkeypatch.setenv("DAGNET_TEST_LLM_KEY", "k")
    async with serve_asgi(endpoint) as url:
        settings = build_settings(
            ValidatorSettings,
            overrides=[
                f'adapters.sn21={{"kind": "openai", "base_url": "{url}/v1", "model": "tiny", "api_key_env": "DAGNET_TEST_LLM_KEY"}}',
            ],
        )
        execution = await asyncio.to_thread(
            run_owned,
            plan,
            check_plan_for(plan, task),
            task,
            owned_runners(settings)(task),
            total_estimated_cost=None,
        )
    assert execution.status == "completed", execution.nodes
    assert execution.final_output["text"] == "tiny: hello" and len(seen) == 1
    assert execution.metrics.latency_s == 0.75  # the profile's, on simulated time
