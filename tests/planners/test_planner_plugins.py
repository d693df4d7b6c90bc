"""Planners as plug-ins: found by name (built-in, entry point, module:attr), made with the
miner's [planner] settings, and — whatever they do wrong — costing one query only."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from miner.app import create_app
from miner.metagraph import StaticMetagraph
from miner.settings import MinerSettings
from neurons.localrun import family_task
from neurons.settings import build_settings
from planners import (
    PLANNER_INTERFACE,
    GoodPlanner,
    PlannerFailure,
    PlannerLoadError,
    PlanProposal,
    answer_for,
    load_planner,
    run_planner,
)
from protocol.metagraph import Axon, Peer
from protocol.response import check_response
from protocol.synapse import TaskPackage
from subnets.owned import owned_runner
from subnets.registry import default_registry
from support.keys import MetagraphBuilder, dev_keypair, signed_headers
from support.miner import FakePlanner, running_miner
from support.peers import serve_asgi
from validator.client import ClientConfig, MinerClient
from validator.validation import OwnedExecution, validation_step

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = TaskPackage.model_validate(
    {
        "task_id": "task-7",
        "task_type": "rag",
        "description": "say hello",
        "constraints": {"max_budget_tao": 1.0, "allowed_subnets": ["sn7"]},
        "available_tools": {"sn7": {"type": "text"}},
    }
)
DOOMED = "doomed"
"""The task id the misbehaving planners below fail on; every other task they plan."""

PLUGIN = """
from protocol.plan import PlanNode, WorkflowPlan

class Echoes:
    name = "echoes"

    def __init__(self, greeting="hello", **_):
        self.greeting = greeting

    def plan(self, package):
        subnet = package.constraints.allowed_subnets[0]
        return WorkflowPlan(nodes=[PlanNode(id="only", subnet=subnet, action="text_transform",
                                            params={"op": "strip", "text": self.greeting})])

class OldInterface(Echoes):
    interface = 0

made = Echoes(greeting="made")
not_a_planner = 42
"""


@pytest.fixture
def plugin_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A module ``myplanners`` and an installed distribution declaring it as the
    ``dagnet.planners`` entry point ``echo-plugin``, both on ``sys.path``."""
    (tmp_path / "myplanners.py").write_text(PLUGIN)
    dist = tmp_path / "myplanners-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: myplanners\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[dagnet.planners]\necho-plugin = myplanners:Echoes\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "myplanners", raising=False)
    return tmp_path


# --- finding a planner by name -----------------------------------------------------------


def test_builtins_load_by_name() -> None:
    assert isinstance(load_planner("good"), GoodPlanner)
    assert load_planner("good", {"latency_headroom": 0.5}).latency_headroom == 0.5


def test_module_attr_is_made_with_the_options(plugin_path: Path) -> None:
    planner = load_planner("myplanners:Echoes", {"greeting": "hi"})
    assert planner.greeting == "hi"
    assert load_planner("myplanners:made").greeting == "made"


def test_entry_point_is_found_by_name(plugin_path: Path) -> None:
    from planners import installed_planners

    assert "echo-plugin" in installed_planners()
    assert load_planner("echo-plugin", {"greeting": "ep"}).greeting == "ep"


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("psychic", {}, "unknown planner 'psychic'; known: good, naive, invalid, precompute"),
        ("nowhere.at.all:Planner", {}, "cannot import planner 'nowhere.at.all:Planner': ModuleNotFoundError"),
        ("myplanners:Missing", {}, "cannot import planner 'myplanners:Missing': AttributeError"),
        ("myplanners:not_a_planner", {}, "is not a planner: int has no plan() method"),
        ("myplanners:OldInterface", {}, "implements planner interface 0; this dagnet speaks 1"),
        ("myplanners:made", {"greeting": "x"}, "is an object, not a factory: it takes no options"),
        ("good", {"latency_headroom": 7}, "could not be made: ValueError: latency_headroom must be in (0, 1]"),
    ],
)
def test_what_cannot_be_loaded_says_why_in_one_line(plugin_path: Path, name: str, options: dict, message: str) -> None:
    with pytest.raises(PlannerLoadError) as raised:
        load_planner(name, options)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_planner_section_of_the_settings(tmp_path: Path) -> None:
    config = tmp_path / "miner.toml"
    config.write_text('[planner]\nname = "naive"\ntimeout_s = 2.5\n[planner.options]\nlatency_headroom = 0.7\n')
    settings = build_settings(MinerSettings, config_file=config, overrides=["planner.options.extra=1"])
    assert settings.planner.name == "naive" and settings.planner.timeout_s == 2.5
    assert settings.planner.options == {"latency_headroom": 0.7, "extra": 1}
    # --planner is applied as the last override: it wins over the file's name
    assert build_settings(MinerSettings, config_file=config, overrides=['planner.name="good"']).planner.name == "good"


@pytest.mark.e2e
def test_module_attr_is_found_in_the_working_folder_as_python_m_finds_it(tmp_path: Path) -> None:
    """`cd ~/my-planner && dagnet plan make ... --planner myplanners:Echoes`: the console
    script's path starts at .venv/bin, so the working folder has to be added."""
    (tmp_path / "myplanners.py").write_text(PLUGIN)
    dagnet = Path(sys.executable).with_name("dagnet")
    result = subprocess.run(
        [str(dagnet), "plan", "make", "rag_towns", "--planner", "myplanners:Echoes"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["workflow_plan"]["nodes"][0]["params"]["text"] == "hello"


@pytest.mark.e2e
def test_unknown_planner_stops_the_miner_before_it_binds() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "neurons.miner", "--dev-key", "//Bob", "--planner", "nowhere:Planner", "--port", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "cannot import planner 'nowhere:Planner'" in result.stderr


@pytest.mark.e2e
async def test_a_plugin_with_options_is_served_by_every_worker(plugin_path: Path, tmp_path: Path) -> None:
    """--planner module:attr with --set planner.options.* reaches each of two worker processes."""
    snapshot = (
        MetagraphBuilder(netuid=3)
        .validator(dev_keypair("Alice"), stake=2_000.0)
        .miner(dev_keypair("Bob"), axon=Axon("127.0.0.1", 8091))
        .build()
    )
    from miner.metagraph import snapshot_to_dict

    metagraph = tmp_path / "mg.json"
    metagraph.write_text(json.dumps(snapshot_to_dict(snapshot)))
    env = {"PYTHONPATH": f"{plugin_path}:{ROOT}", "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "neurons.miner",
            "--dev-key",
            "//Bob",
            "--metagraph-file",
            str(metagraph),
            "--netuid",
            "3",
            "--port",
            "0",
            "--workers",
            "2",
            "--planner",
            "myplanners:Echoes",
            "--set",
            "planner.options.greeting=from-settings",
            "--set",
            f"nonce_db={tmp_path / 'nonces.db'}",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = proc.stderr.readline()
        assert "listening on" in line, line
        url = line.split("listening on ")[1].split()[0]
        async with httpx.AsyncClient(timeout=60) as client:
            await client.get(url + "/health")  # waits in the backlog until a worker serves, unsigned
        body = PACKAGE.model_dump_json().encode()
        texts = set()
        for _ in range(4):  # a new connection each time: the requests spread over the workers
            headers = signed_headers(dev_keypair("Alice"), dev_keypair("Bob"), "/WorkflowSynapse", body)
            async with httpx.AsyncClient(timeout=60) as client:
                answer = await client.post(url + "/WorkflowSynapse", content=body, headers=headers)
            assert answer.status_code == 200, answer.text
            texts.add(answer.json()["workflow_plan"]["nodes"][0]["params"]["text"])
        assert texts == {"from-settings"}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# --- the interface: sync or async, what may be returned ----------------------------------


class _Async:
    name = "async"

    async def plan(self, package: TaskPackage) -> PlanProposal:
        await asyncio.sleep(0)
        return FakePlanner().plan(package)


async def test_async_and_bare_plan_answers_pass_the_validators_check() -> None:
    bare = FakePlanner().plan(PACKAGE).plan
    for result in (await run_planner(_Async(), PACKAGE), bare):
        answer = answer_for(result, PACKAGE, miner_uid=1)
        check = check_response(answer.model_dump_json(by_alias=True, exclude_none=True).encode(), PACKAGE)
        assert check.ok, check.reason
    assert answer_for(bare, PACKAGE, 1).total_estimated_cost == bare.estimated_cost()


def test_a_synapse_answer_keeps_the_packages_task_fields() -> None:
    answer = FakePlanner().plan(PACKAGE).answer(PACKAGE, miner_uid=5)
    tampered = answer.model_copy(update={"description": "something else", "miner_uid": 9})
    kept = answer_for(tampered, PACKAGE, miner_uid=1)
    assert kept.description == "say hello" and kept.miner_uid == 1
    with pytest.raises(PlannerFailure, match="answered task 'other'"):
        answer_for(answer.model_copy(update={"task_id": "other"}), PACKAGE, 1)


# --- a planner that fails costs one query ------------------------------------------------


DOOMED_SLEEP_S = 3.0
"""How long the sleeping planners take over :data:`DOOMED`: an answer that came sooner did
not wait for them, however loaded the machine."""


class _Misbehaves:
    """Plans like :class:`FakePlanner`, except for the task :data:`DOOMED`."""

    def __init__(self, how: str, inner=None) -> None:
        self.name = how
        self.how = how
        self.inner = inner or FakePlanner()

    def plan(self, package: TaskPackage):
        if package.task_id != DOOMED:
            return self.inner.plan(package)
        if self.how == "raises":
            raise RuntimeError("boom")
        if self.how == "exits":
            sys.exit(3)
        if self.how == "sleeps":
            time.sleep(DOOMED_SLEEP_S)
            return self.inner.plan(package)
        if self.how == "garbage":
            return {"nodes": "not a plan"}
        proposal = self.inner.plan(package)  # "out_of_range": a plan with a confidence of 7
        return PlanProposal(proposal.plan, proposal.total_estimated_cost, 0.1, 7.0, "sure")


class _Planned:
    """Answers every task with one plan made beforehand (no planning time in the miner)."""

    def __init__(self, proposal: PlanProposal) -> None:
        self.proposal = proposal

    def plan(self, package: TaskPackage) -> PlanProposal:
        return self.proposal


class _SleepsAsync(_Misbehaves):
    async def plan(self, package: TaskPackage):
        if package.task_id == DOOMED:
            await asyncio.sleep(DOOMED_SLEEP_S)
        return self.inner.plan(package)


FAILURES = {
    "raises": (500, "planner_error", "error", "the planner raised RuntimeError: boom"),
    "exits": (500, "planner_error", "error", "the planner raised SystemExit: 3"),
    "sleeps": (503, "planner_timeout", "timeout", "the planner did not answer within 0.5s"),
    "sleeps_async": (503, "planner_timeout", "timeout", "the planner did not answer within 0.5s"),
    "garbage": (500, "planner_invalid", "invalid", "the planner returned a dict, not a plan"),
    "out_of_range": (500, "planner_invalid", "invalid", "confidence"),
}


def _misbehaving(how: str, inner=None) -> _Misbehaves:
    return _SleepsAsync(how, inner) if how == "sleeps_async" else _Misbehaves(how, inner)


@pytest.mark.parametrize("how", sorted(FAILURES))
async def test_a_failing_planner_costs_that_query_only(how: str) -> None:
    status, reason, kind, message = FAILURES[how]
    doomed = PACKAGE.model_copy(update={"task_id": DOOMED}).model_dump(mode="json")
    settings = MinerSettings(port=0, planner={"timeout_s": 0.5, "workers": 1})
    async with running_miner(planner=_misbehaving(how), settings=settings) as miner:
        await miner.post("/WorkflowSynapse", PACKAGE.model_dump(mode="json"))  # the planning process is loaded
        started = time.perf_counter()
        failed, health_during = await asyncio.gather(
            miner.post("/WorkflowSynapse", doomed), _after(0.1, miner.get("/health"))
        )
        failed_s = time.perf_counter() - started
        served = await miner.post("/WorkflowSynapse", PACKAGE.model_dump(mode="json"))
        health = (await miner.get("/health")).json()
        metrics = (await miner.get("/metrics")).text
    assert failed.status_code == status, failed.text
    assert failed.json()["reason"] == reason and message in failed.json()["error"]
    assert failed_s < DOOMED_SLEEP_S  # answered at the 0.5 s deadline, not when the planner finishes
    assert health_during.status_code == 200  # the event loop kept serving while the planner ran
    assert served.status_code == 200 and check_response(served.content, PACKAGE).ok
    assert health["planner"]["failures"][kind] == 1 and health["planner"]["interface"] == PLANNER_INTERFACE
    assert f'dagnet_miner_planner_failures_total{{kind="{kind}"}} 1.0' in metrics


async def _after(delay_s: float, awaitable):
    await asyncio.sleep(delay_s)
    return await awaitable


@pytest.mark.parametrize("how", ["raises", "sleeps", "garbage"])
async def test_the_validator_scores_a_failing_planner_zero_for_that_task_only(how: str) -> None:
    """A real validation step (signed query, owned execution): the task the planner fails
    on scores 0 with the miner's reason; another task, planned, scores as good's plan does."""
    validator, key = dev_keypair("Alice"), dev_keypair("Bob")
    snapshot = MetagraphBuilder(netuid=7).validator(validator, stake=1_000.0).miner(key).build()
    doomed, fine = family_task("rag_towns", 3), family_task("dt_sales", 3)
    doomed = doomed.model_copy(update={"task_id": DOOMED})
    # good's plan for the fine task is made here, so the miner's planning takes no search time
    # and the timeout (shorter than the doomed planner's 3 s sleep) cannot catch it on a loaded
    # machine; a planning search there took over 0.5 s at a load of 8.
    planned = _Planned(GoodPlanner().plan(fine.package()))
    app = create_app(
        MinerSettings(port=0, planner={"timeout_s": 2.0}),
        keypair=key,
        metagraph=StaticMetagraph(snapshot),
        registry=default_registry(),
        planner=_misbehaving(how, planned),
    )
    outcomes = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        async with contextlib.AsyncExitStack() as stack:
            miner = Peer(1, key.ss58_address, await stack.enter_async_context(serve_asgi(app)))
            client = await stack.enter_async_context(MinerClient(validator, config=ClientConfig(timeout_s=5.0)))
            for task in (doomed, fine):
                result = await validation_step(
                    task=task,
                    miners=[miner],
                    client=client,
                    runner_factory=lambda package, _, task=task: owned_runner(task),
                    owned=OwnedExecution(pool),
                )
                outcomes[task.task_id] = result.outcomes[0]
    status, reason, _, _ = FAILURES[how]
    failed, served = outcomes[DOOMED], outcomes["dt_sales"]
    assert failed.score.S == 0 and failed.execution is None
    assert failed.reason.startswith(f"query failed: http {status}") and reason in failed.reason, failed.reason
    assert served.reason is None and served.score.S > 0.5, served.score


async def test_a_raising_planner_is_logged_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    """The validator is told the reason only; the miner's log carries where the planner raised."""
    doomed = PACKAGE.model_copy(update={"task_id": DOOMED}).model_dump(mode="json")
    with caplog.at_level("WARNING", logger="dagnet.miner"):
        async with running_miner(planner=_misbehaving("raises")) as miner:
            failed = await miner.post("/WorkflowSynapse", doomed)
    assert failed.json()["reason"] == "planner_error" and "Traceback" not in failed.text
    (record,) = [r for r in caplog.records if "planner raises: error" in r.getMessage()]
    logged = record.getMessage()
    assert "Traceback (most recent call last)" in logged and "in plan" in logged
    assert logged.rstrip().endswith("RuntimeError: boom")
