"""The validator's SQLite state: atomic steps, rolling windows, the task lifecycle, shared opening, old files."""

from __future__ import annotations

import dataclasses
import math
import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from scoring.margin import K_SE, WORLDS, Payout, leaders
from scoring.worlds import bar
from validator.answers import first_commit_order
from validator.state import (
    ACTIVE,
    COOL_OFF_TEMPOS,
    SET_ASIDE,
    SET_ASIDE_AFTER,
    WINDOW_SIZE,
    ExecutionRecord,
    PaidOut,
    ReferenceRun,
    TaskLifecycle,
    ValidatorState,
    plan_hash,
)


def _record(block: int, uid: int, s: float, *, hotkey: str | None = None, task: str = "t1") -> ExecutionRecord:
    return ExecutionRecord(
        block=block,
        uid=uid,
        hotkey=hotkey or f"hk{uid}",
        task_id=task,
        base_task_id=task,
        instance_seed=block * 7,
        plan={"nodes": [{"id": "a", "subnet": "sn1", "action": "echo"}]},
        metrics={"cost_tao": 0.01},
        final_output={"text": str(s)},
        score={"S": s, "details": {}},
        reason=None,
    )


@pytest.fixture
def state(tmp_path: Path) -> ValidatorState:
    store = ValidatorState(tmp_path / "state.sqlite")
    yield store
    store.close()


def test_a_settled_step_is_stored_whole_and_only_once(state: ValidatorState) -> None:
    records = [_record(10, 1, 0.5), _record(10, 2, 0.25)]
    assert state.settle_step(10, records)
    assert not state.settle_step(10, records)  # a step replayed after a restart never counts twice
    stored = state.executions(block=10)
    assert [(r.uid, r.score["S"], r.plan_hash) for r in stored] == [
        (1, 0.5, plan_hash(records[0].plan)),
        (2, 0.25, plan_hash(records[1].plan)),
    ]
    assert state.execution(stored[0].id) == stored[0]
    assert state.window().means() == {1: 0.5, 2: 0.25}
    assert state.tasks_seen() == {1: 1, 2: 1}
    assert state.last_step_block() == 10


def test_a_step_that_fails_to_settle_leaves_nothing(state: ValidatorState) -> None:
    state.settle_step(1, [_record(1, 1, 1.0)])
    broken = _record(2, 2, 0.5)
    object.__setattr__(broken, "score", {"no S": True})
    with pytest.raises(KeyError):
        state.settle_step(2, [_record(2, 1, 0.0), broken])
    assert state.last_step_block() == 1
    assert len(state.executions()) == 1
    assert state.window().means() == {1: 1.0}


def test_what_weights_read_is_one_moment_even_when_a_step_settles_between_reads(tmp_path: Path) -> None:
    state, writer = ValidatorState(tmp_path / "state.sqlite"), ValidatorState(tmp_path / "state.sqlite")
    state.settle_step(1, [_record(1, 1, 0.5)])

    reads = 0

    def settle_in_between(statement: str) -> None:  # a step settles (another writer) before the second read
        nonlocal reads
        if "FROM windows" in statement:
            reads += 1
            if reads == 2:
                writer.settle_step(2, [_record(2, 1, 1.0), _record(2, 2, 1.0)])

    state._conn.set_trace_callback(settle_in_between)
    standing = state.standing()
    assert standing.window.means() == {1: 0.5}
    assert standing.tasks_seen == {1: 1} and standing.hotkeys == {1: "hk1"}
    latest = state.standing()  # the step settled before (or as) this read began: it is in it whole
    state._conn.set_trace_callback(None)
    assert latest.window.means() == {1: 0.75, 2: 1.0}
    assert latest.tasks_seen == {1: 2, 2: 1} and latest.hotkeys == {1: "hk1", 2: "hk2"}
    state.close()
    writer.close()


def test_windows_keep_the_last_window_and_restart_with_a_new_hotkey(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    state = ValidatorState(path)
    for block in range(WINDOW_SIZE + 50):
        state.settle_step(block, [_record(block, 3, 1.0 if block >= 50 else 0.0)])
    state.close()
    reopened = ValidatorState(path)
    assert reopened.window().count(3) == WINDOW_SIZE and reopened.window().mean(3) == 1.0
    assert reopened.tasks_seen() == {3: WINDOW_SIZE + 50}
    reopened.settle_step(WINDOW_SIZE + 100, [_record(WINDOW_SIZE + 100, 3, 0.2, hotkey="someone-else")])
    assert reopened.window().count(3) == 1 and reopened.tasks_seen() == {3: 1}
    assert reopened.hotkeys() == {3: "someone-else"}
    reopened.close()


def _margined(
    block: int, uid: int, s: float, reference: float, *, digest: str | None = None, **kwargs
) -> ExecutionRecord:
    margin = s - reference
    return dataclasses.replace(
        _record(block, uid, s, **kwargs),
        reference_S=reference,
        margin=margin,
        credit=margin,
        share=1.0,
        digest=digest or f"d{uid}",
    )


def test_margin_windows_keep_the_last_window_beside_the_scores_and_restart_with_a_new_hotkey(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    state = ValidatorState(path)
    last = WINDOW_SIZE + 50
    for block in range(last):
        state.settle_step(block, [_margined(block, 3, 0.9 if block >= 50 else 0.5, 0.8)])
    state.settle_step(last, [_record(last, 3, 0.7)])  # a step whose reference produced no score: no margin
    state.close()
    reopened = ValidatorState(path)
    means = reopened.standing().means()[3]
    assert means.margin == pytest.approx(0.1) and means.se == pytest.approx(0.0)
    assert means.score == pytest.approx((0.7 + 0.9 * (WINDOW_SIZE - 1)) / WINDOW_SIZE)
    stored = reopened.executions(block=last - 1)[0]
    assert (stored.reference_S, stored.credit, stored.share, stored.digest) == (0.8, pytest.approx(0.1), 1.0, "d3")
    assert stored.margin == pytest.approx(0.1) and reopened.executions(block=last)[0].margin is None
    reopened.settle_step(last + 50, [_margined(last + 50, 3, 0.2, 0.8, hotkey="someone-else")])
    assert (
        reopened.standing().means()[3].margin == pytest.approx(-0.6) and reopened.standing().means()[3].se == math.inf
    )
    reopened.close()


def test_margins_are_tallied_by_world_over_the_last_worlds_whatever_the_steps_a_tempo(tmp_path: Path) -> None:
    """A validator steps every block, so a tempo of 360 blocks is more steps than a window
    of 300: the margins a miner's pay reads are tallied by the world each was played in,
    over the last ``WORLDS`` worlds, however many steps each had; the error counts worlds."""
    path = tmp_path / "state.sqlite"
    state = ValidatorState(path)
    per_tempo, tempos = 40, WORLDS + 2  # more steps in all than the step window holds
    for block in range(per_tempo * tempos):
        tempo = block // per_tempo
        lucky = 0.05 if tempo % 2 else -0.05  # the world's luck: the same on every step of a tempo
        record = dataclasses.replace(_margined(block, 3, 0.8 + lucky + 0.01, 0.8), world_tempo=tempo)
        state.settle_step(block, [record])
    state.close()
    reopened = ValidatorState(path)
    tallied = reopened.standing().tallies[3]
    assert [t.world for t in tallied] == list(range(2, tempos)) and {t.n for t in tallied} == {per_tempo}
    means = reopened.standing().means()[3]
    assert per_tempo * tempos > WINDOW_SIZE and means.margin == pytest.approx(0.01)
    # Counted by steps 960 margins of SD 0.05 would be sure of +0.01 (error 0.0016); counted
    # by worlds, 24 worlds of ±0.05 are not: the error is 0.0104 and the bar 2.11 errors.
    assert means.se == pytest.approx(0.05 / math.sqrt(WORLDS - 1))  # CR1: the worlds' spread, G/(G−1)
    assert means.k_se == pytest.approx(bar(K_SE, WORLDS)) and means.clear < 0
    reopened.close()


def test_answers_and_first_seen_persist_and_give_first_commit_order(tmp_path: Path) -> None:
    """uid 9 sends plan ``p`` from block 0; uid 2 (a lower uid, registered earlier) starts
    copying it at block 5. After a restart, uid 9's claim is earlier: it is first in
    first-commit order and leads the group; a new hotkey on a uid starts its window afresh."""
    path = tmp_path / "state.sqlite"
    state = ValidatorState(path, window_size=4)
    for block in range(10):
        records = [_margined(block, 9, 0.9, 0.8, digest="p")]
        if block >= 5:
            records.append(_margined(block, 2, 0.9, 0.8, digest="p"))
        state.settle_step(block, records)
    state.close()
    reopened = ValidatorState(path, window_size=4)
    kept, claimed = reopened.answer_windows()
    assert [e.step for e in kept[9][1]] == [6, 7, 8, 9] and kept[2][0] == "hk2"
    assert claimed == {9: 0, 2: 5}
    order = first_commit_order(claimed, {2: 1, 9: 100})
    assert order == [9, 2] and leaders({uid: entries for uid, (_, entries) in kept.items()}, order) == {9: 9, 2: 9}
    reopened.settle_step(10, [_margined(10, 2, 0.5, 0.8, hotkey="newcomer")])
    kept, _ = reopened.answer_windows()
    assert kept[2][0] == "newcomer" and [e.step for e in kept[2][1]] == [10]
    reopened.close()


def test_a_state_file_from_before_the_margin_gets_its_columns_and_weights_record_their_payout(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)
    old.executescript("""
        CREATE TABLE windows (uid INTEGER PRIMARY KEY, hotkey TEXT NOT NULL, scores TEXT NOT NULL, tasks_seen INTEGER NOT NULL);
        INSERT INTO windows VALUES (3, 'hk3', '[0.5, 1.0]', 2);
        CREATE TABLE executions (
            id INTEGER PRIMARY KEY AUTOINCREMENT, block INTEGER NOT NULL, uid INTEGER NOT NULL,
            hotkey TEXT NOT NULL, task_id TEXT NOT NULL, base_task_id TEXT NOT NULL,
            instance_seed INTEGER NOT NULL, synthetic INTEGER NOT NULL DEFAULT 0, hint_tier TEXT NOT NULL DEFAULT 'full',
            drawn_tempo INTEGER, plan_hash TEXT, plan TEXT, metrics TEXT,
            final_output TEXT, score TEXT NOT NULL, s REAL NOT NULL, reason TEXT, capped TEXT, world_tempo INTEGER,
            UNIQUE (block, uid));
        INSERT INTO executions (block, uid, hotkey, task_id, base_task_id, instance_seed, score, s)
            VALUES (1, 3, 'hk3', 'dt_sales', 'dt_sales', 6, '{"S": 0.5}', 0.5);
        CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
        INSERT INTO meta VALUES ('instance_secret', 6820936120913407871);
    """)
    old.close()
    state = ValidatorState(path)
    try:
        assert state.executions()[0].margin is None and state.executions()[0].digest is None
        (means,) = state.standing().means().values()  # the scores [0.5, 1.0], no margin yet
        assert (means.score, means.margin, means.se) == (0.75, 0.0, math.inf)
        assert means.score_se == pytest.approx(0.25)
        state.settle_step(2, [_margined(2, 3, 0.9, 0.8)])
        assert state.standing().means()[3].margin == pytest.approx(0.1)
        assert state.last_payout() is None
        state.weights_accepted(10, {0: 0.95, 3: 0.05}, Payout.BURN, burn_uid=0)
    finally:
        state.close()
    again = ValidatorState(path)
    assert again.last_payout() == PaidOut(10, Payout.BURN, 0) and again.last_weights() == {0: 0.95, 3: 0.05}
    again.close()


def test_the_instance_secret_is_made_once_and_kept(tmp_path: Path) -> None:
    first = ValidatorState(tmp_path / "s.sqlite")
    secret = first.instance_secret()
    first.close()
    again = ValidatorState(tmp_path / "s.sqlite")
    assert again.instance_secret() == secret
    again.close()


def _judged(state: ValidatorState, block: int, task: str, failure: str | None, *, tempo: int = 10) -> bool:
    """A step at ``block`` whose reference run on ``task`` failed (``failure``) or not; a
    succeeded one also settles a miner's record, a failed one charges no miner."""
    records = [] if failure else [_record(block, 1, 0.0, task=task)]
    return state.settle_step(block, records, ReferenceRun(task, failure), tempo=tempo)


def test_a_task_is_set_aside_after_failed_reference_runs_in_a_row(state: ValidatorState) -> None:
    state.task_states(["broken", "fine"])
    assert _judged(state, 100, "broken", "the reference output has quality 0")
    assert state.task_lifecycles()["broken"] == TaskLifecycle("broken", ACTIVE, None, None, None, 1)
    assert _judged(state, 101, "broken", None)  # one success clears the count
    assert state.task_lifecycles()["broken"].reference_failures == 0
    for block in range(102, 102 + SET_ASIDE_AFTER):
        assert _judged(state, block, "broken", f"failure at {block}")
    last = 102 + SET_ASIDE_AFTER - 1
    assert state.task_lifecycles()["broken"] == TaskLifecycle(
        "broken",
        SET_ASIDE,
        last,
        last + COOL_OFF_TEMPOS * 10,
        f"failure at {last}",
        SET_ASIDE_AFTER,
    )
    assert state.task_states() == {"broken": SET_ASIDE, "fine": ACTIVE}
    assert not _judged(state, last, "broken", "again")  # a replayed step counts nothing twice
    assert state.task_lifecycles()["broken"].reference_failures == SET_ASIDE_AFTER
    assert state.window().means() == {1: 0.0}  # only the succeeded step charged its miner


def test_miners_scores_never_move_a_task(state: ValidatorState) -> None:
    state.task_states(["hard"])
    for block in range(100, 160):  # every miner at 0, the reference fine: the task stays
        state.settle_step(
            block, [_record(block, uid, 0.0, task="hard") for uid in range(4)], ReferenceRun("hard"), tempo=10
        )
    assert state.task_lifecycles()["hard"] == TaskLifecycle("hard", ACTIVE, None, None, None, 0)


def test_a_set_aside_task_returns_at_the_end_of_its_cool_off(state: ValidatorState) -> None:
    state.task_states(["broken"])
    for block in (10, 11):
        _judged(state, block, "broken", "broken generator", tempo=5)
    until = 11 + COOL_OFF_TEMPOS * 5
    assert state.task_lifecycles()["broken"].until_block == until
    assert state.reinstate(until - 1) == []
    assert state.task_states()["broken"] == SET_ASIDE
    assert state.reinstate(until) == ["broken"]
    assert state.task_lifecycles()["broken"] == TaskLifecycle("broken", ACTIVE, None, None, None, 0)
    assert state.reinstate(until + 1) == []


def test_setting_a_task_aside_without_the_tempo_settles_nothing(state: ValidatorState) -> None:
    _judged(state, 1, "t", "broken")
    with pytest.raises(ValueError, match="tempo"):
        state.settle_step(2, [], ReferenceRun("t", "broken"))
    assert state.last_step_block() == 1 and state.task_lifecycles()["t"].reference_failures == 1


def test_reset_makes_every_task_active_again(state: ValidatorState) -> None:
    state.task_states(["a", "b"])
    for block in (1, 2):
        _judged(state, block, "a", "broken")
    _judged(state, 3, "b", "once")
    assert state.reset_tasks() == 2
    assert set(state.task_lifecycles().values()) == {
        TaskLifecycle("a", ACTIVE, None, None, None, 0),
        TaskLifecycle("b", ACTIVE, None, None, None, 0),
    }


def test_a_state_file_of_the_old_schema_opens_with_every_task_active(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)
    old.executescript("""
        CREATE TABLE tasks (task_id TEXT PRIMARY KEY, state TEXT NOT NULL, high_tempos INTEGER NOT NULL DEFAULT 0,
            low_tempos INTEGER NOT NULL DEFAULT 0, quarantined_tempos INTEGER NOT NULL DEFAULT 0);
        INSERT INTO tasks VALUES ('hard', 'quarantined', 0, 3, 2), ('gone', 'removed', 0, 3, 5), ('easy', 'deprecated', 3, 0, 0);
        CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
        INSERT INTO meta VALUES ('last_closed_tempo', 41), ('instance_secret', 6820936120913407871), ('last_weights_block', 400);
        CREATE TABLE windows (uid INTEGER PRIMARY KEY, hotkey TEXT NOT NULL, scores TEXT NOT NULL, tasks_seen INTEGER NOT NULL);
        INSERT INTO windows VALUES (3, 'hk3', '[0.5, 1.0]', 2);
    """)
    old.close()
    state = ValidatorState(path)
    try:
        assert state.task_lifecycles() == {}  # the miner-steered verdicts are gone
        assert state.task_states(["hard", "gone"]) == {"gone": ACTIVE, "hard": ACTIVE}
        assert state.instance_secret() == 6820936120913407871 and state.last_weights_block() == 400
        assert state.window().means() == {3: 0.75}
        assert state._get_meta("last_closed_tempo") is None
        _judged(state, 500, "hard", "broken")
    finally:
        state.close()
    again = ValidatorState(path)  # a migrated file opens as it is
    assert again.task_lifecycles()["hard"].reference_failures == 1
    again.close()


def test_records_of_an_old_state_file_get_their_synthetic_flag_once(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)
    old.executescript("""
        CREATE TABLE executions (
            id INTEGER PRIMARY KEY AUTOINCREMENT, block INTEGER NOT NULL, uid INTEGER NOT NULL,
            hotkey TEXT NOT NULL, task_id TEXT NOT NULL, base_task_id TEXT NOT NULL,
            instance_seed INTEGER NOT NULL, plan_hash TEXT, plan TEXT, metrics TEXT,
            final_output TEXT, score TEXT NOT NULL, s REAL NOT NULL, reason TEXT, UNIQUE (block, uid));
        INSERT INTO executions (block, uid, hotkey, task_id, base_task_id, instance_seed, score, s)
            VALUES (1, 1, 'hk1', 'syn_0a1b2c3d', 'dt_sales', 5, '{"S": 0.5}', 0.5),
                   (2, 1, 'hk1', 'dt_sales', 'dt_sales', 6, '{"S": 0.25}', 0.25);
        CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
        INSERT INTO meta VALUES ('instance_secret', 6820936120913407871);
    """)
    old.close()
    state = ValidatorState(path)
    try:
        assert [(r.task_id, r.synthetic) for r in state.executions()] == [("syn_0a1b2c3d", True), ("dt_sales", False)]
        state.settle_step(3, [dataclasses.replace(_record(3, 2, 0.5), synthetic=True)])
        assert state.executions(block=3)[0].synthetic
    finally:
        state.close()
    again = ValidatorState(path)  # migrated once: the stored flags are read as they are
    assert [r.synthetic for r in again.executions()] == [True, False, True]
    again.close()


def _open_and_settle(path: str, worker: int, start) -> None:
    start.wait()
    state = ValidatorState(Path(path))
    for i in range(20):
        block = worker * 1000 + i
        state.settle_step(block, [_record(block, worker, 0.5), _record(block, 100 + worker, 0.25)])
    state.close()


def test_two_processes_open_and_write_the_state_at_once(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(2)
    workers = [ctx.Process(target=_open_and_settle, args=(str(path), w, start)) for w in (1, 2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    assert [w.exitcode for w in workers] == [0, 0]
    state = ValidatorState(path)
    assert state.steps_settled() == 40 and len(state.executions()) == 80
    assert state.tasks_seen() == {1: 20, 2: 20, 101: 20, 102: 20}
    state.close()
