"""The validator's SQLite state: atomic steps, rolling windows, lifecycle, shared opening."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from validator.state import (
    ACTIVE, DEPRECATED, QUARANTINED, REMOVED, ExecutionRecord, ValidatorState, plan_hash,
)


def _record(block: int, uid: int, s: float, *, hotkey: str | None = None, task: str = "t1") -> ExecutionRecord:
    return ExecutionRecord(
        block=block, uid=uid, hotkey=hotkey or f"hk{uid}", task_id=task, base_task_id=task, instance_seed=block * 7,
        plan={"nodes": [{"id": "a", "subnet": "sn1", "action": "echo"}]}, metrics={"cost_tao": 0.01},
        final_output={"text": str(s)}, score={"S": s, "details": {}}, reason=None,
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
        (1, 0.5, plan_hash(records[0].plan)), (2, 0.25, plan_hash(records[1].plan)),
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


def test_windows_keep_the_last_hundred_and_restart_with_a_new_hotkey(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    state = ValidatorState(path)
    for block in range(150):
        state.settle_step(block, [_record(block, 3, 1.0 if block >= 50 else 0.0)])
    state.close()
    reopened = ValidatorState(path)
    assert reopened.window().count(3) == 100 and reopened.window().mean(3) == 1.0
    assert reopened.tasks_seen() == {3: 150}
    reopened.settle_step(200, [_record(200, 3, 0.2, hotkey="someone-else")])
    assert reopened.window().count(3) == 1 and reopened.tasks_seen() == {3: 1}
    assert reopened.hotkeys() == {3: "someone-else"}
    reopened.close()


def test_the_instance_secret_is_made_once_and_kept(tmp_path: Path) -> None:
    first = ValidatorState(tmp_path / "s.sqlite")
    secret = first.instance_secret()
    first.close()
    again = ValidatorState(tmp_path / "s.sqlite")
    assert again.instance_secret() == secret
    again.close()


def _tempo(state: ValidatorState, tempo: int, scores: dict[str, list[float]]) -> dict[str, str]:
    first = tempo * 10
    for i, (task, values) in enumerate(sorted(scores.items())):
        state.settle_step(first + i, [_record(first + i, uid, s, task=task) for uid, s in enumerate(values)])
    return state.close_tempo(tempo, first, first + 9)


def test_lifecycle_deprecates_quarantines_and_removes(state: ValidatorState) -> None:
    state.task_states(["easy", "hard", "mixed"])
    easy, hard, mixed = [0.95, 0.99, 0.92, 0.2], [0.0, 0.05, 0.01, 0.9], [0.95, 0.95, 0.5, 0.0]
    changes = [_tempo(state, t, {"easy": easy, "hard": hard, "mixed": mixed}) for t in range(3)]
    assert changes[:2] == [{}, {}]
    assert changes[2] == {"easy": DEPRECATED, "hard": QUARANTINED}
    assert _tempo(state, 3, {"mixed": mixed}) == {}
    assert state.close_tempo(3, 30, 39) == {}  # closing a tempo twice changes nothing
    for tempo in range(4, 7):
        assert _tempo(state, tempo, {"mixed": mixed}) == {}
    assert _tempo(state, 7, {"mixed": mixed}) == {"hard": REMOVED}
    assert state.task_states() == {"easy": DEPRECATED, "hard": REMOVED, "mixed": ACTIVE}
    assert state.lifecycle_counters()["hard"]["quarantined_tempos"] == 5


def test_a_high_run_broken_by_one_tempo_starts_again(state: ValidatorState) -> None:
    state.task_states(["t"])
    for tempo, values in enumerate([[1.0] * 4, [1.0] * 4, [1.0, 1.0, 0.0, 0.0], [1.0] * 4, [1.0] * 4]):
        assert _tempo(state, tempo, {"t": values}) == {}
    assert _tempo(state, 5, {"t": [1.0] * 4}) == {"t": DEPRECATED}


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
