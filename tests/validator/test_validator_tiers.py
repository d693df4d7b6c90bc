"""The hint tier a validator draws per step, and the drawn families it offers per tempo:
the draw honours its shares, records keep the tier and the tempo, the audit replays at
the recorded tier, the reference judges the full tier (docs/validator.md)."""

from __future__ import annotations

import hashlib
import sqlite3
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from test_validator_loop import KEYS, TASK_IDS, _loop

from engine.owned import evaluate_owned
from neurons.localrun import family_task
from planners import load_planner
from protocol.hints import TIER_SHARES, TIERS
from protocol.synapse import TaskPackage
from protocol.task import Task, at_tier
from protocol.validation import check_plan_for
from subnets.owned import owned_runner
from tasks import family
from validator.audit import recorded_task, replay
from validator.prometheus import ValidatorMetrics
from validator.sampling import (
    DEFAULT_TIER_SHARES,
    FixedTasks,
    TaskDraw,
    TaskSource,
    draw_task,
    draw_tier,
    instance_seed,
    step_tier,
    tempo_of,
    tier_shares_problem,
)
from validator.settings import SHIPPED_TASKS, ValidatorSettings
from validator.state import ExecutionRecord, ValidatorState

SECRET = 0x5EC12E7
HOTKEY = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"


def _tier_by_hand(secret: int, block: int, task_id: str, shares: dict[str, float]) -> str:
    fraction = int.from_bytes(hashlib.sha256(f"{secret}:{block}:{task_id}:tier".encode()).digest()[:8], "big") / 2**64
    running = 0.0
    for tier in TIERS:
        running += shares.get(tier, 0.0)
        if fraction < running:
            return tier
    raise AssertionError("shares sum below the fraction")


def test_the_tier_is_the_secret_digest_against_the_running_shares() -> None:
    for block in (0, 1, 77, 10**9):
        for task_id in ("dt_sales", "rag_towns"):
            assert draw_tier(SECRET, block, task_id, TIER_SHARES) == _tier_by_hand(SECRET, block, task_id, TIER_SHARES)


def test_the_shares_are_honoured_over_a_fixed_set_of_blocks() -> None:
    blocks = range(6000)
    for shares in (TIER_SHARES, {"full": 0.6, "goal": 0.4}, {"outline": 1.0}):
        drawn = Counter(draw_tier(SECRET, block, "dt_sales", shares) for block in blocks)
        for tier in TIERS:
            assert abs(drawn[tier] / len(blocks) - shares.get(tier, 0.0)) < 0.02, (shares, drawn)


def test_by_default_steps_are_sent_at_the_documented_shares() -> None:
    assert DEFAULT_TIER_SHARES == TIER_SHARES == {"full": 0.2, "outline": 0.3, "goal": 0.5}
    assert ValidatorSettings().tier_shares == TIER_SHARES
    drawn = Counter(draw_tier(SECRET, block, "dt_sales") for block in range(5000))
    assert all(abs(drawn[tier] / 5000 - share) < 0.02 for tier, share in TIER_SHARES.items()), drawn


def test_the_tier_needs_the_secret() -> None:
    """Two validators (two secrets) draw different tiers for the same block and task."""
    mine = [draw_tier(SECRET, b, "dt_sales", TIER_SHARES) for b in range(200)]
    theirs = [draw_tier(SECRET + 1, b, "dt_sales", TIER_SHARES) for b in range(200)]
    assert mine != theirs


@pytest.mark.parametrize(
    "shares, problem",
    [
        ({"full": 0.5}, "sum to 0.5"),
        ({"full": 0.5, "hint": 0.5}, "unknown hint tier 'hint'"),
        ({"full": 1.5, "goal": -0.5}, "'goal' is -0.5"),
        ({"full": float("nan")}, "'full' is nan"),
    ],
)
def test_bad_tier_shares_are_refused_with_the_reason(shares: dict[str, float], problem: str) -> None:
    assert problem in tier_shares_problem(shares)
    with pytest.raises(ValueError, match="tier_shares: "):
        ValidatorSettings(tier_shares=shares)


def test_shares_within_a_billionth_of_one_are_accepted() -> None:
    assert tier_shares_problem({"full": 0.2, "outline": 0.3, "goal": 0.5 - 5e-10}) is None
    assert tier_shares_problem({"full": 0.2, "outline": 0.3, "goal": 0.5 - 5e-9}) is not None


def test_a_curated_family_goes_out_at_full_and_a_drawn_one_at_one_tier_per_tempo() -> None:
    """A curated family's description is the same on every step: sent at a lower tier, a
    miner that kept its full hints from an earlier step would look them up. A drawn family
    keeps one tier for its tempo, so one sent at outline or goal never goes out with its hints."""
    base = family("rag_towns").task(family("rag_towns").example())
    assert {draw_task(HOTKEY, SECRET, b, [base], tier_shares={"goal": 1.0}).tier for b in range(50)} == {"full"}
    for tempo in range(20):
        tiers = {step_tier(SECRET, b, "gen_x", {"gen_x": tempo}) for b in range(tempo * 360, tempo * 360 + 60)}
        assert len(tiers) == 1 and tiers == {draw_tier(SECRET, tempo, "gen_x")}
    per_tempo = Counter(step_tier(SECRET, 0, "gen_x", {"gen_x": tempo}) for tempo in range(3000))
    assert all(abs(per_tempo[tier] / 3000 - share) < 0.03 for tier, share in TIER_SHARES.items()), per_tempo
    assert len({step_tier(SECRET, b, "gen_x", {"gen_x": None}) for b in range(60)}) == 3  # no tempo: per block


def test_the_draw_sends_its_task_at_its_tier() -> None:
    base = family("rag_towns").task(family("rag_towns").example())
    shares = {"goal": 1.0}
    draw = draw_task(HOTKEY, SECRET, 42, [base], tier_shares=shares, synthetic_rate=0.0, drawn={"rag_towns": 0})
    assert draw.tier == "goal" and draw.drawn_tempo == 0
    sent = draw.task(lambda task, seed: family_task(task.task_id, seed))
    assert sent.hint_tier == "goal" and sent.steps == [] and sent.seed == instance_seed(SECRET, 42, "rag_towns")
    assert sent.examples == base.examples and sent.instance_inputs  # the examples go out, the instance is kept
    outline = replace(draw, tier="outline").task(lambda task, seed: family_task(task.task_id, seed))
    assert [s.id for s in outline.steps] == [f"s{i}" for i in range(1, len(base.steps) + 1)]
    assert all(not s.params for s in outline.steps)


# -- records and the audit ---------------------------------------------------------------------


def _scored_record(task: Task, block: int, draw: TaskDraw, full: TaskPackage) -> ExecutionRecord:
    """good's plan of the ``full`` package, run and scored on ``task`` (the draw's task) as a
    validator does: a real execution whatever tier ``task`` was sent at."""
    plan = load_planner("good").plan(full).answer(task.package(), miner_uid=0)
    check = check_plan_for(plan.workflow_plan, task)
    evaluation = evaluate_owned(
        plan.workflow_plan, check, task, owned_runner(task), total_estimated_cost=plan.total_estimated_cost
    )
    execution = evaluation.execution
    return ExecutionRecord(
        block=block,
        uid=1,
        hotkey="hk1",
        task_id=task.task_id,
        base_task_id=draw.base.task_id,
        instance_seed=draw.seed,
        synthetic=draw.synthetic,
        hint_tier=draw.tier,
        drawn_tempo=draw.drawn_tempo,
        plan=plan.workflow_plan.model_dump(mode="json", by_alias=True, exclude_none=True),
        metrics={
            "status": execution.status,
            "completion_ratio": execution.metrics.completion_ratio,
            "latency_s": execution.metrics.latency_s,
            "cost_tao": execution.metrics.cost_tao,
            "retries": execution.metrics.retries,
            "unplanned_retries": execution.metrics.unplanned_retries,
            "timeouts": execution.metrics.timeouts,
            "hard_failures": execution.metrics.hard_failures,
            "budget_ceiling": execution.budget_ceiling,
            "clock": "simulated",
        },
        final_output=execution.final_output,
        score=evaluation.score.model_dump(mode="json"),
        reason=None,
    )


class _Curated(FixedTasks):
    """The shipped families named, their hidden instances drawn per seed."""

    def __init__(self, *task_ids: str) -> None:
        super().__init__([family(t).task(family(t).example()) for t in task_ids])

    def instance(self, task: Task, seed: int) -> Task:
        return family_task(task.task_id, seed)


def test_a_goal_tier_record_is_stored_and_replays_at_its_tier(tmp_path: Path) -> None:
    source = _Curated("dt_inventory")
    # a curated family goes out at full today; a record of one at goal (an older validator's) still replays
    draw = replace(draw_task(HOTKEY, SECRET, 1234, source.tasks(), synthetic_rate=0.0), tier="goal")
    task = draw.task(source.instance)
    record = _scored_record(task, 1234, draw, family("dt_inventory").package)
    assert record.score["S"] > 0.5  # a real execution, not an invalid answer
    state = ValidatorState(tmp_path / "v.sqlite")
    try:
        state.settle_step(1234, [record])
        (stored,) = state.executions()
    finally:
        state.close()
    assert (stored.hint_tier, stored.drawn_tempo) == ("goal", None)
    rebuilt = recorded_task(stored, source)
    assert rebuilt.hint_tier == "goal" and rebuilt.steps == [] and rebuilt == task
    assert replay(stored, source).identical


class _Drawn:
    """A stand-in for the families drawn per tempo: the named shipped families under
    ids of their own, their instances drawn per seed; remembers what it was asked."""

    def __init__(self, *task_ids: str) -> None:
        self.task_ids = task_ids
        self.asked: list[tuple[int, int]] = []

    def __call__(self, secret: int, tempo: int) -> TaskSource:
        self.asked.append((secret, tempo))
        return _Renamed(self.task_ids, f"gen_{tempo:04x}")


class _Renamed(FixedTasks):
    def __init__(self, task_ids: tuple[str, ...], prefix: str) -> None:
        self.prefix = prefix
        super().__init__([self._named(family(t).task(family(t).example())) for t in task_ids])

    def _named(self, task: Task) -> Task:
        return task.model_copy(update={"task_id": f"{self.prefix}_{task.task_id}"})

    def instance(self, task: Task, seed: int) -> Task:
        return self._named(family_task(task.task_id.removeprefix(f"{self.prefix}_"), seed))


def test_a_drawn_family_record_replays_from_its_tempo(tmp_path: Path) -> None:
    drawn = _Drawn("rag_towns")
    source = drawn(SECRET, 7)
    draw = draw_task(HOTKEY, SECRET, 75, source.tasks(), synthetic_rate=0.0, drawn={"gen_0007_rag_towns": 7})
    assert draw.drawn_tempo == 7
    record = _scored_record(draw.task(source.instance), 75, draw, family("rag_towns").package)
    assert record.base_task_id == "gen_0007_rag_towns" and record.score["S"] > 0.5
    assert replay(record, _Curated(), drawn=drawn, secret=SECRET).identical
    assert drawn.asked[-1] == (SECRET, 7)
    with pytest.raises(KeyError, match="no drawn families are configured"):
        replay(record, _Curated())
    with pytest.raises(KeyError, match="drawn for tempo 8"):
        replay(replace(record, drawn_tempo=8), _Curated(), drawn=_Drawn("dt_sales"), secret=SECRET)


def test_dagnet_validator_replay_draws_a_drawn_family_again(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from neurons.cli import app
    from validator.sources import drawn_source

    path = tmp_path / "v.sqlite"
    state = ValidatorState(path)
    secret = state.instance_secret()
    drawn = drawn_source(SHIPPED_TASKS, 2)
    source = drawn(secret, 31)
    assert all(t.task_id.startswith("gen_") for t in source.tasks()) and len(source.tasks()) == 2
    draw = draw_task(
        HOTKEY,
        secret,
        310,
        source.tasks(),
        synthetic_rate=0.0,
        drawn=dict.fromkeys((t.task_id for t in source.tasks()), 31),
    )
    record = _scored_record(draw.task(source.instance), 310, draw, at_tier(draw.base, "full"))
    assert record.score["S"] > 0.5, record.score
    try:
        state.settle_step(310, [record])
        (stored,) = state.executions()
    finally:
        state.close()
    assert drawn_source(Path("tasks.json"), 2) is None and drawn_source(SHIPPED_TASKS, 0) is None
    done = CliRunner().invoke(app, ["validator", "--state", str(path), "--replay", str(stored.id)])
    assert done.exit_code == 0 and '"identical": true' in done.stdout, done.output
    refused = CliRunner().invoke(
        app, ["validator", "--state", str(path), "--replay", str(stored.id), "--set", "drawn_per_tempo=0"]
    )
    assert refused.exit_code == 2 and "no drawn families are configured" in refused.output, refused.output


def test_records_of_a_state_file_without_tiers_read_as_full_and_curated(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    state = ValidatorState(path)
    state.settle_step(
        1,
        [
            ExecutionRecord(
                block=1,
                uid=1,
                hotkey="hk1",
                task_id="dt_sales",
                base_task_id="dt_sales",
                instance_seed=5,
                plan=None,
                metrics=None,
                final_output=None,
                score={"S": 0.5},
                reason=None,
                hint_tier="goal",
                drawn_tempo=3,
            )
        ],
    )
    state.close()
    old = sqlite3.connect(path)  # the file as written before records kept their tier and tempo
    old.executescript(
        "ALTER TABLE executions DROP COLUMN hint_tier; ALTER TABLE executions DROP COLUMN drawn_tempo; "
        "PRAGMA user_version = 0;"
    )  # and before the migrations were numbered
    old.close()
    state = ValidatorState(path)
    try:
        (record,) = state.executions()
        assert (record.hint_tier, record.drawn_tempo) == ("full", None)
        new = replace(record, block=2, id=None, hint_tier="outline", drawn_tempo=12)
        state.settle_step(2, [new])
        assert [(r.hint_tier, r.drawn_tempo) for r in state.executions()] == [("full", None), ("outline", 12)]
    finally:
        state.close()


def test_tempo_of_counts_tempos_from_block_zero() -> None:
    assert [tempo_of(b, 10) for b in (0, 9, 10, 19, 20)] == [0, 0, 1, 1, 2]


# -- metrics -----------------------------------------------------------------------------------


def test_execution_metrics_carry_a_tier_label_of_three_values() -> None:
    metrics = ValidatorMetrics()
    samples = {
        s.labels.get("tier")
        for family_ in metrics.registry.collect()
        if family_.name in ("dagnet_validator_executions", "dagnet_validator_execution_score")
        for s in family_.samples
    }
    assert samples == set(TIERS)


# -- the loop ----------------------------------------------------------------------------------


@pytest.mark.e2e
async def test_a_loop_sending_goal_judges_the_task_on_its_full_tier(tmp_path: Path) -> None:
    """Every drawn family goes out at goal (no steps: naive cannot plan it), yet the reference
    runs on the full tier of the same instance, so no task is charged."""
    drawn = _Drawn("dt_inventory", "rag_comets")
    async with _loop(tmp_path, tier_shares={"goal": 1.0}) as (loop, chain):
        loop.drawn = drawn
        hyper = await chain.hyperparameters()
        candidates = [*loop.source.tasks(), *drawn(loop.stepper.secret, tempo_of(chain.head, hyper.tempo)).tasks()]
        blocks = [
            b
            for b in range(chain.head, chain.head + hyper.tempo)
            if draw_task(loop.hotkey, loop.stepper.secret, b, candidates, synthetic_rate=0.0).base.task_id.startswith(
                "gen_"
            )
        ][:2]
        for block in blocks:
            chain.head = block
            await loop.step(block)
        records = loop.state.executions()
        assert records and {r.hint_tier for r in records} == {"goal"}
        naive = loop.snapshot.by_hotkey(KEYS["naive"].ss58_address).uid
        assert all(r.reason for r in records if r.uid == naive)  # naive plans from full hints only
        assert all(life.reference_failures == 0 for life in loop.state.task_lifecycles().values())
        assert all(replay(r, loop.source, drawn=drawn, secret=loop.stepper.secret).identical for r in records)
        scored = loop.metrics.registry.get_sample_value("dagnet_validator_execution_score_count", {"tier": "goal"})
        assert scored == len(records)
        for uid in {r.uid for r in records}:  # each scored miner's margin over the reference is on /metrics
            assert loop.metrics.registry.get_sample_value("dagnet_validator_margin", {"uid": str(uid)}) is not None


@pytest.mark.e2e
async def test_the_loop_offers_this_tempos_drawn_families_and_never_sets_them_aside(tmp_path: Path) -> None:
    drawn = _Drawn("dt_inventory", "rag_comets")
    async with _loop(tmp_path) as (loop, chain):
        loop.drawn = drawn
        hyper = await chain.hyperparameters()
        candidates = [*loop.source.tasks(), *drawn(loop.stepper.secret, tempo_of(chain.head, hyper.tempo)).tasks()]
        block = next(
            b
            for b in range(chain.head, chain.head + hyper.tempo)
            if draw_task(loop.hotkey, loop.stepper.secret, b, candidates, synthetic_rate=0.0).base.task_id.startswith(
                "gen_"
            )
        )
        chain.head = block
        summary = await loop.step(block)
        assert summary is not None and summary.base_task_id.startswith("gen_"), summary
        records = loop.state.executions()
        assert {r.drawn_tempo for r in records} == {tempo_of(block, hyper.tempo)}
        assert all(replay(r, loop.source, drawn=drawn, secret=loop.stepper.secret).identical for r in records)
        assert set(loop.state.task_lifecycles()) == set(TASK_IDS)  # drawn families are not in the lifecycle
