"""Feedback on the wire: a validator tells each miner how its own step went (``POST /Feedback``),
the miner keeps it across restarts and hands it to its planner's ``observe``; nobody else's
feedback ever reaches a miner, and a miner that refuses or is down loses nothing else."""

from __future__ import annotations

import asyncio
import contextlib
import stat
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from miner.asgi import send_error
from miner.feedback import BLOCK_SLACK, FeedbackInbox, FeedbackStore
from miner.settings import MinerSettings
from planners import load_planner
from protocol.feedback import MAX_REASON_CHARS, AttemptFeedback, NodeFeedback, StepFeedback
from protocol.metagraph import MetagraphSnapshot, Peer
from protocol.routes import FEEDBACK_PATH
from scoring.composite import invalid_score
from subnets.owned import owned_runner
from support.fakechain import FakeChain
from support.keys import MetagraphBuilder, dev_keypair, signed_headers
from support.miner import FakePlanner, running_miner
from support.network import serve_miners
from support.polling import until
from support.tasks import SomeFamilies
from validator.client import ClientConfig, MinerClient
from validator.feedback import FeedbackSender, step_feedback
from validator.loop import LoopConfig, ValidatorLoop
from validator.outcome import MinerOutcome, StepResult, StepTimings
from validator.state import ValidatorState

VALIDATOR, MINER = dev_keypair("Alice"), dev_keypair("Bob")


class Recording(FakePlanner):
    """The fake planner, keeping every feedback message it is handed."""

    def __init__(self) -> None:
        self.seen: list[StepFeedback] = []

    def observe(self, feedback: StepFeedback) -> None:
        self.seen.append(feedback)


def _message(*, block: int = 40, uid: int = 1, validator: str = VALIDATOR.ss58_address, **extra) -> StepFeedback:
    return StepFeedback(
        validator_hotkey=validator,
        miner_uid=uid,
        block=block,
        task_id="rag_towns",
        hint_tier="goal",
        outcome="completed",
        score={"S": 0.8},
        **extra,
    )


def _body(message: StepFeedback) -> bytes:
    return message.model_dump_json().encode()


def _settings(tmp_path: Path) -> MinerSettings:
    return MinerSettings(port=0, feedback_db=tmp_path / "feedback.sqlite")


async def test_signed_feedback_reaches_its_miners_planner(tmp_path: Path) -> None:
    planner = Recording()
    message = _message(miner_hotkey=MINER.ss58_address)
    async with running_miner(settings=_settings(tmp_path), planner=planner) as miner:
        response = await miner.post(FEEDBACK_PATH, _body(message))
        metrics = (await miner.get("/metrics")).text
    assert response.status_code == 200, response.text
    assert response.json() == {"status": "accepted", "stored": True, "observed": True}
    assert planner.seen == [message]
    assert f'dagnet_miner_requests_total{{code="200",endpoint="{FEEDBACK_PATH}"}} 1.0' in metrics


def _forged(miner, body: bytes) -> dict[str, str]:
    """Signed headers of another body: the signature does not cover what is sent."""
    return signed_headers(VALIDATOR, miner.keypair, FEEDBACK_PATH, body + b" ")


@pytest.mark.parametrize(
    ("case", "status", "reason"),
    [
        ("another uid", 403, "not_yours"),
        ("another miner hotkey", 403, "not_yours"),
        ("names another validator", 403, "not_yours"),
        ("unsigned", 401, "malformed"),
        ("forged", 401, "bad_signature"),
        ("signed for another miner", 401, "wrong_receiver"),
        ("signed by a miner", 403, "no_validator_permit"),
    ],
)
async def test_feedback_reaches_only_its_own_miner(tmp_path: Path, case: str, status: int, reason: str) -> None:
    """Another hotkey asking gets nothing: there is no way to read feedback (no GET), and
    feedback not signed by the validator it names, or not for this miner, is refused."""
    other = dev_keypair("Charlie")
    snapshot = MetagraphBuilder(netuid=7).validator(VALIDATOR, stake=1_000.0).miner(MINER).miner(other).build()
    message = {
        "another uid": _message(uid=2),
        "another miner hotkey": _message(miner_hotkey=other.ss58_address),
        "names another validator": _message(validator=other.ss58_address),
    }.get(case, _message())
    body = _body(message)
    planner = Recording()
    async with running_miner(settings=_settings(tmp_path), planner=planner, snapshot=snapshot) as miner:
        headers = {"unsigned": {"Content-Type": "application/json"}, "forged": _forged(miner, body)}.get(case)
        signer = other if case == "signed by a miner" else None
        receiver = other if case == "signed for another miner" else None
        response = await miner.post(FEEDBACK_PATH, body, headers=headers, signer=signer, receiver=receiver)
        read = await miner.client.get(
            miner.url + FEEDBACK_PATH, headers=signed_headers(VALIDATOR, MINER, FEEDBACK_PATH, method="GET")
        )
    assert (response.status_code, response.json()["reason"]) == (status, reason)
    assert read.status_code == 405
    assert planner.seen == [] and len(FeedbackStore(tmp_path / "feedback.sqlite", MINER.ss58_address)) == 0


async def test_a_raising_observe_costs_nothing_and_a_planner_without_one_is_unaffected(tmp_path: Path) -> None:
    class Raises(FakePlanner):
        def observe(self, feedback: StepFeedback) -> None:
            raise RuntimeError("cannot learn")

    for planner in (Raises(), FakePlanner()):
        async with running_miner(settings=_settings(tmp_path), planner=planner) as miner:
            response = await miner.post(FEEDBACK_PATH, _body(_message()))
            health = await miner.get("/health")
        assert response.json() == {"status": "accepted", "stored": True, "observed": False}
        assert health.status_code == 200


async def test_a_planner_that_has_not_caught_up_turns_further_feedback_away() -> None:
    release = threading.Event()

    class Slow(Recording):
        def observe(self, feedback: StepFeedback) -> None:
            release.wait()
            super().observe(feedback)

    planner = Slow()
    inbox = FeedbackInbox(planner, None, max_waiting=2)
    first, second = inbox.submit(_message(block=1)), inbox.submit(_message(block=2))
    assert inbox.submit(_message(block=3)) is None
    release.set()
    assert [await first, await second] == [(False, True)] * 2
    assert [m.block for m in planner.seen] == [1, 2] and inbox.submit(_message(block=3)) is not None


async def test_the_store_survives_a_restart_and_replays_into_observe(tmp_path: Path) -> None:
    messages = [_message(block=block) for block in (41, 40)]
    async with running_miner(settings=_settings(tmp_path), planner=Recording()) as miner:
        for message in messages:
            assert (await miner.post(FEEDBACK_PATH, _body(message))).status_code == 200
    restarted = Recording()
    async with running_miner(settings=_settings(tmp_path), planner=restarted):
        pass
    assert restarted.seen == messages  # in the order they arrived, whatever blocks they name


def test_dagnet_miner_keeps_feedback_under_its_home_unless_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from neurons.miner import MinerProcessConfig, build_miner_app

    monkeypatch.delenv("DAGNET_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    metagraph = Path(__file__).resolve().parents[2] / "examples" / "metagraph.json"
    config = MinerProcessConfig(dev_key="//Bob", metagraph_file=metagraph)
    default = build_miner_app(config).state.feedback.store.path
    assert default == tmp_path / ".dagnet" / f"miner-{MINER.ss58_address}" / "feedback.sqlite"
    monkeypatch.setenv("DAGNET_HOME", str(tmp_path / "data"))  # as the image sets it: its volume
    default = build_miner_app(config).state.feedback.store.path
    assert default == tmp_path / "data" / f"miner-{MINER.ss58_address}" / "feedback.sqlite"
    chosen = config.model_copy(update={"settings": _settings(tmp_path)})
    assert build_miner_app(chosen).state.feedback.store.path == tmp_path / "feedback.sqlite"


def test_the_store_keeps_the_most_recent_per_validator_and_only_its_own_hotkeys(tmp_path: Path) -> None:
    path = tmp_path / "feedback.sqlite"
    store = FeedbackStore(path, MINER.ss58_address, keep_per_validator=3)
    for block in range(1, 6):
        store.add(_message(block=block))
        store.add(_message(block=block, validator="5Other"))
    store.add(_message(block=5))  # sent again: replaces, never doubles
    mine = [(m.validator_hotkey, m.block) for m in store.replay()]
    assert sorted(mine) == sorted((v, b) for v in (VALIDATOR.ss58_address, "5Other") for b in (3, 4, 5))
    assert list(FeedbackStore(path, "5SomeoneElse").replay()) == []
    small = FeedbackStore(tmp_path / "small.sqlite", MINER.ss58_address, max_validator_bytes=len(_body(_message())) * 2)
    for block in range(1, 6):
        small.add(_message(block=block))
        small.add(_message(block=block, validator="5Other"))
    assert [(m.validator_hotkey, m.block) for m in small.replay()] == [
        (VALIDATOR.ss58_address, 4),
        ("5Other", 4),
        (VALIDATOR.ss58_address, 5),
        ("5Other", 5),
    ]


# -- a hostile validator against the store (docs/hardening.md, "Feedback") ------------

ATTACKER = dev_keypair("Charlie")
HUGE_BYTES = 930 * 1024
"""One attacking message, encoded: under the miner's 1 MiB body cap."""


def _huge(block: int) -> StepFeedback:
    """A message of about :data:`HUGE_BYTES` from the attacker, about block ``block``."""
    attempts = [AttemptFeedback(started_s=0.0, latency_s=1.0, error="x" * MAX_REASON_CHARS)] * 6
    node = NodeFeedback(
        node_id="n",
        subnet="sn1",
        action="search",
        status="failed",
        reason="y" * MAX_REASON_CHARS,
        cost_tao=0.0,
        attempts=attempts,
    )
    one = len(node.model_dump_json()) + 1
    message = _message(block=block, validator=ATTACKER.ss58_address, nodes=[node] * (HUGE_BYTES // one))
    assert HUGE_BYTES - one < len(_body(message)) < 1024 * 1024
    return message


def test_a_validator_flooding_the_store_evicts_only_its_own_rows(tmp_path: Path) -> None:
    """72 messages of 930 KiB, each claiming a block past any other validator's, leave the
    20 rows of another validator in place, in their order; the attacker keeps its share."""
    store = FeedbackStore(tmp_path / "feedback.sqlite", MINER.ss58_address)
    honest = [_message(block=block) for block in range(20, 40)]
    for message in honest:
        store.add(message)
    for i in range(72):
        store.add(_huge(10**15 + i))
    kept = list(store.replay())
    assert [m for m in kept if m.validator_hotkey == VALIDATOR.ss58_address] == honest
    attackers = [m.block for m in kept if m.validator_hotkey == ATTACKER.ss58_address]
    assert attackers == [10**15 + 70, 10**15 + 71]  # its most recent, within MAX_VALIDATOR_BYTES (2 MiB)


async def test_feedback_for_a_block_far_past_the_miners_chain_is_refused(tmp_path: Path) -> None:
    """The wipe attack through a served miner: the attacker's huge messages claiming block
    10**15+i are refused 422 ``block_ahead`` (the store's own eviction, which 72 of them tested
    above, is never reached); a restarted planner replays the honest validator's rows."""
    snapshot = MetagraphBuilder(netuid=7, block=100).validator(VALIDATOR).miner(MINER).validator(ATTACKER).build()
    honest = [_message(block=block) for block in range(80, 100)]
    async with running_miner(settings=_settings(tmp_path), planner=Recording(), snapshot=snapshot) as miner:
        for message in honest:
            assert (await miner.post(FEEDBACK_PATH, _body(message))).status_code == 200
        huge = _body(_huge(0))
        refused = []
        for i in range(8):
            body = huge.replace(b'"block":0,', f'"block":{10**15 + i},'.encode(), 1)
            refused.append(await miner.post(FEEDBACK_PATH, body, signer=ATTACKER))
        edge = await miner.post(
            FEEDBACK_PATH, _body(_message(block=100 + BLOCK_SLACK, validator=ATTACKER.ss58_address)), signer=ATTACKER
        )
        past = await miner.post(
            FEEDBACK_PATH, _body(_message(block=101 + BLOCK_SLACK, validator=ATTACKER.ss58_address)), signer=ATTACKER
        )
    assert {r.status_code for r in refused} == {422} and edge.status_code == 200, edge.text
    assert past.status_code == 422 and past.json() == {
        "reason": "block_ahead",
        "error": f"feedback for block {101 + BLOCK_SLACK}, but this miner's chain is at block 100"
        f" (at most {BLOCK_SLACK} blocks ahead are taken)",
    }
    assert refused[0].json()["reason"] == "block_ahead"
    restarted = Recording()
    async with running_miner(settings=_settings(tmp_path), planner=restarted, snapshot=snapshot):
        pass
    assert [m for m in restarted.seen if m.validator_hotkey == VALIDATOR.ss58_address] == honest


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_store_is_0600_in_a_0700_directory_made_so_or_tightened(tmp_path: Path) -> None:
    fresh = FeedbackStore(tmp_path / "new" / "deeper" / "feedback.sqlite", MINER.ss58_address)
    fresh.add(_message())
    assert [_mode(fresh.path.parent), _mode(fresh.path)] == [0o700, 0o600]
    assert {_mode(p) for p in fresh.path.parent.iterdir()} == {0o600}  # -wal and -shm too
    fresh.close()

    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    (loose / "feedback.sqlite").touch(mode=0o644)
    (loose / "feedback.sqlite").chmod(0o644)
    store = FeedbackStore(loose / "feedback.sqlite", MINER.ss58_address)
    assert len(store) == 0
    assert [_mode(loose), _mode(loose / "feedback.sqlite")] == [0o700, 0o600]
    store.close()

    shared = tmp_path / "shared"  # a folder holding other files (a run folder) is not ours to close
    shared.mkdir()
    shared.chmod(0o755)
    (shared / "validator.log").touch()
    store = FeedbackStore(shared / "feedback.sqlite", MINER.ss58_address)
    store.add(_message())
    assert [_mode(shared), _mode(shared / "feedback.sqlite")] == [0o755, 0o600]
    store.close()


# -- the validator's side ------------------------------------------------------------


def _outcome(uid: int, hotkey: str) -> MinerOutcome:
    return MinerOutcome(uid, hotkey, invalid_score("no plan"), "no plan", None, 0.1)


@contextlib.asynccontextmanager
async def _miners(planners: dict[str, object], *, wrap=lambda app, name: app) -> AsyncIterator[MetagraphSnapshot]:
    """One miner per name (keys //dagnet-fb-NAME) on loopback, validator //Alice."""
    names = {id(planner): name for name, planner in planners.items()}
    async with contextlib.AsyncExitStack() as stack:
        _, snapshot = await serve_miners(
            VALIDATOR,
            [(planner, dev_keypair(f"dagnet-fb-{name}")) for name, planner in planners.items()],
            stack,
            wrap=lambda app, planner: wrap(app, names[id(planner)]),
        )
        yield snapshot


async def test_each_miner_is_sent_its_own_feedback_and_nobody_elses() -> None:
    planners = {"a": Recording(), "b": Recording()}
    async with _miners(planners) as snapshot, MinerClient(VALIDATOR) as client:
        peers = [Peer.from_neuron(n) for n in snapshot.neurons if n.axon is not None]
        result = StepResult("rag_towns", [_outcome(p.uid, p.hotkey) for p in peers], StepTimings(0, 0, 0, 0, 0))
        sender = FeedbackSender(client)
        sender.send(result, SomeFamilies("rag_towns").tasks()[0], peers, block=40, tempo=4)
        await sender.drain()
    assert (sender.sent, sender.failed) == (2, 0)
    for planner, peer in zip(planners.values(), peers):
        (seen,) = planner.seen
        assert (seen.miner_uid, seen.miner_hotkey, seen.validator_hotkey) == (
            peer.uid,
            peer.hotkey,
            VALIDATOR.ss58_address,
        )
        assert (seen.outcome, seen.reason, seen.score, seen.tempo) == ("invalid", "no plan", {}, 4)


def test_feedback_tells_the_nodes_and_score_parts_of_the_miners_own_execution() -> None:
    from engine.owned import evaluate_owned
    from protocol.validation import check_plan_for
    from tasks import family

    found = family("rag_towns")
    task = found.task(found.instance(1))
    plan = load_planner("good").plan(found.package).plan
    evaluation = evaluate_owned(plan, check_plan_for(plan, task), task, owned_runner(task), total_estimated_cost=0.0)
    outcome = MinerOutcome(
        3,
        "5M",
        evaluation.score,
        None,
        evaluation.execution,
        0.1,
        plan.model_dump(mode="json", by_alias=True, exclude_none=True),
    )
    message = step_feedback(outcome, task, validator_hotkey="5V", block=40, tempo=None)
    assert message.outcome == evaluation.execution.status and message.score["S"] == evaluation.score.S
    assert {n.subnet for n in message.nodes} == {n.subnet for n in plan.nodes}
    assert sum(len(n.attempts) for n in message.nodes) == sum(r.attempts for r in evaluation.execution.nodes.values())


class _NoFeedback:
    """A miner that refuses feedback (503), or, with ``release``, hangs on it until released."""

    def __init__(self, app, release: asyncio.Event | None = None) -> None:
        self.app, self.release = app, release

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"] == FEEDBACK_PATH:
            if self.release is not None:
                await self.release.wait()
            await send_error(send, 503, "busy", "no feedback today")
            return
        await self.app(scope, receive, send)


async def test_a_miner_that_is_down_or_refuses_feedback_keeps_its_score(tmp_path: Path) -> None:
    """ "Down" here is a miner that never answers its feedback: the validator gives up after
    its short timeout. Scores are settled before any feedback is sent."""
    release = asyncio.Event()
    planners = {name: load_planner("good") for name in ("refuses", "down")}

    def wrap(app, name):
        return _NoFeedback(app, release if name == "down" else None)

    async with _miners(planners, wrap=wrap) as snapshot, _validator(snapshot, tmp_path) as (loop, chain):
        loop.feedback.timeout_s = 0.5
        summary = await loop.step(chain.head)
        settled = loop.state.window().means()
        await loop.feedback.drain()
        release.set()
        assert (loop.feedback.sent, loop.feedback.failed) == (0, 2)
        assert loop.state.window().means() == settled
        assert summary is not None and all(score > 0.5 for score in summary.scores.values())
        assert {r.uid: r.score["S"] for r in loop.state.executions()} == summary.scores


@contextlib.asynccontextmanager
async def _validator(snapshot: MetagraphSnapshot, tmp_path: Path) -> AsyncIterator[tuple[ValidatorLoop, FakeChain]]:
    """A validator loop (//Alice) over ``snapshot``'s miners, sending rag_towns at the full tier."""
    chain = FakeChain(hotkey=VALIDATOR.ss58_address, snapshot=snapshot)
    state = ValidatorState(tmp_path / "validator.sqlite")
    try:
        async with MinerClient(VALIDATOR, config=ClientConfig(timeout_s=5.0)) as client:
            yield (
                ValidatorLoop(
                    chain,
                    state,
                    client,
                    SomeFamilies("rag_towns"),
                    owned_runner=owned_runner,
                    config=LoopConfig(synthetic_rate=0.0, tier_shares={"full": 1.0}),
                ),
                chain,
            )
    finally:
        state.close()


async def test_a_stopped_loop_ends_its_feedback_before_the_client_closes(tmp_path: Path) -> None:
    """At a localnet's Ctrl-C the validator logged `feedback to uid 4 failed … RuntimeError:
    Cannot send a request, as the client has been closed`: feedback still pending when the
    loop returned ran while its client closed. The loop now ends its feedback first: a
    message still hanging after the grace is cancelled and counted failed, none is left."""
    release = asyncio.Event()
    planners = {"hangs": load_planner("good")}
    async with _miners(planners, wrap=lambda app, name: _NoFeedback(app, release)) as snapshot:
        try:
            async with _validator(snapshot, tmp_path) as (loop, _):
                loop.feedback.timeout_s, loop.feedback.grace_s = 600.0, 0.05  # the request itself never ends
                stop = asyncio.Event()
                running = asyncio.create_task(loop.run(stop))
                await until(lambda: loop.feedback.in_flight > 0)  # a step settled, its feedback hangs
                stop.set()
                await running
                assert (loop.feedback.in_flight, loop.feedback.sent, loop.feedback.failed) == (0, 0, 1)
        finally:
            release.set()
