"""A plan scores the same on the network as in `dagnet run --task`, on every task type.

With owned execution (the validator's default) the two are one path on simulated time,
so the score objects are identical, bit for bit. With an external provider (opt-in):

Both sides run the same plan on the same hidden instance of a v2 family. The network
side is a real step: a signed miner answers over HTTP and its plan runs on a stand-in
tool provider that plays each family's published subnet profile
(``MinerSettings.provider_tasks``, what ``dagnet miner --provider-tasks`` sets).
The dry run is ``dagnet run --task FAMILY --seed N`` as a function. Only wall-clock
latency may differ (HTTP on loopback), so the scores differ by its part alone.
"""

from __future__ import annotations

import contextlib
import json

import pytest

from miner.app import create_app
from miner.metagraph import StaticMetagraph
from miner.serving import EVERY_TOOL
from miner.settings import MinerSettings
from neurons.localrun import family_task, run_document
from planners import load_planner
from protocol.documents import load_plan_document
from protocol.metagraph import Peer
from protocol.task import Task
from scoring.composite import W_LATENCY
from subnets.owned import owned_runner
from subnets.registry import default_registry
from support.keys import MetagraphBuilder, dev_keypair
from support.peers import serve_asgi
from support.tasks import provider_profiles
from tasks import FamilyTasks
from validator.client import ClientConfig, MinerClient
from validator.remote import RemoteRunner, every_peer_serves
from validator.validation import OwnedExecution, validation_step

pytestmark = pytest.mark.e2e


VALIDATOR = dev_keypair("Alice")
MINER = dev_keypair("dagnet-fidelity-miner")
PROVIDER = dev_keypair("dagnet-fidelity-provider")
HIDDEN = 31337
"""The seed of the instance both sides run: not the public example (seed 0)."""


def _roomiest(task_type: str) -> Task:
    """The hidden instance of the family of this type with the widest latency limit per step:
    each node's trip over loopback HTTP (signing, verifying) costs the smallest share of it."""
    candidates = [t for t in FamilyTasks().tasks() if t.task_type == task_type and not t.requires_model]
    roomiest = max(candidates, key=lambda t: t.constraints.max_latency_seconds / max(1, len(t.steps)))
    return family_task(roomiest.task_id, HIDDEN)


@pytest.mark.parametrize("task_type", ["agent", "code", "data_transform", "rag"])
async def test_network_score_matches_the_dry_run(task_type: str) -> None:
    task = _roomiest(task_type)
    planner = load_planner("good")
    answer = planner.plan(task.package()).answer(task.package(), miner_uid=1)
    dry = await run_document(
        load_plan_document(answer.model_dump(mode="json", by_alias=True, exclude_none=True)), task=task
    )

    snapshot = MetagraphBuilder(netuid=7).validator(VALIDATOR, stake=1_000.0).miner(MINER).miner(PROVIDER).build()
    profiles = provider_profiles(FamilyTasks().tasks())
    miner_app = create_app(
        MinerSettings(port=0),
        keypair=MINER,
        metagraph=StaticMetagraph(snapshot),
        registry=default_registry(),
        planner=planner,
    )
    provider_app = create_app(
        MinerSettings(port=0, serve=EVERY_TOOL, provider_tasks=profiles),
        keypair=PROVIDER,
        metagraph=StaticMetagraph(snapshot),
        registry=default_registry(),
        planner=planner,
    )
    async with contextlib.AsyncExitStack() as stack:
        miner = Peer(1, MINER.ss58_address, await stack.enter_async_context(serve_asgi(miner_app)))
        provider = Peer(2, PROVIDER.ss58_address, await stack.enter_async_context(serve_asgi(provider_app)))
        client = await stack.enter_async_context(MinerClient(VALIDATOR, config=ClientConfig(timeout_s=5.0)))
        result = await validation_step(
            task=task,
            miners=[miner],
            client=client,
            runner_factory=lambda package, _: RemoteRunner(client, every_peer_serves([provider]), package),
        )
    (outcome,) = result.outcomes
    assert outcome.reason is None, outcome.reason
    assert (result.task_id, task.seed, dry["seed"]) == (task.task_id, HIDDEN, HIDDEN)
    network, dry_score = outcome.score, dry["score"]
    assert dry_score["S"] > 0.5, dry_score  # a real plan, not two zeros agreeing
    for part in ("S_success", "S_cost", "S_reliability", "output_quality", "completion_ratio"):
        assert getattr(network, part) == pytest.approx(dry_score[part], abs=1e-9), part
    assert outcome.execution.metrics.cost_tao == pytest.approx(dry["cost_tao"], abs=1e-12)
    assert json.loads(json.dumps(outcome.execution.final_output)) == dry["final_output"]  # the same instance ran
    # S is linear in its parts and every part but latency is equal (above): the scores differ
    # by the latency part's weight times its difference, whatever the loopback's wall clock
    # did (a loaded machine moved S_latency by 0.04 and S by 0.021 once).
    moved = W_LATENCY * (network.S_latency - dry_score["S_latency"])
    assert network.S - dry_score["S"] == pytest.approx(moved, abs=1e-6), (network.S, dry_score["S"])


@pytest.mark.parametrize("task_type", ["agent", "code", "data_transform", "rag"])
async def test_owned_execution_scores_exactly_as_the_dry_run(task_type: str) -> None:
    """The validator's own execution of a served plan gives the score object, final
    output and report figures that `dagnet run --task FAMILY --seed N` gives."""
    from concurrent.futures import ThreadPoolExecutor

    task = _roomiest(task_type)
    planner = load_planner("good")
    answer = planner.plan(task.package()).answer(task.package(), miner_uid=1)
    dry = await run_document(
        load_plan_document(answer.model_dump(mode="json", by_alias=True, exclude_none=True)), task=task
    )

    snapshot = MetagraphBuilder(netuid=7).validator(VALIDATOR, stake=1_000.0).miner(MINER).build()
    miner_app = create_app(
        MinerSettings(port=0),
        keypair=MINER,
        metagraph=StaticMetagraph(snapshot),
        registry=default_registry(),
        planner=planner,
    )
    with ThreadPoolExecutor(max_workers=2) as pool:
        async with contextlib.AsyncExitStack() as stack:
            miner = Peer(1, MINER.ss58_address, await stack.enter_async_context(serve_asgi(miner_app)))
            client = await stack.enter_async_context(MinerClient(VALIDATOR, config=ClientConfig(timeout_s=5.0)))
            result = await validation_step(
                task=task,
                miners=[miner],
                client=client,
                runner_factory=lambda package, _: owned_runner(task),
                owned=OwnedExecution(pool),
            )
    (outcome,) = result.outcomes
    assert outcome.reason is None, outcome.reason
    assert dry["score"]["S"] > 0.5, dry["score"]
    assert outcome.score.model_dump() == dry["score"]
    assert outcome.summary()["clock"] == "simulated"
    assert outcome.execution.metrics.latency_s == dry["latency_s"]
    assert json.loads(json.dumps(outcome.execution.final_output)) == dry["final_output"]
