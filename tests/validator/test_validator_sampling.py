"""Deterministic task choice, synthetic variants and miner samples (docs/validator.md)."""

from __future__ import annotations

import hashlib

import pytest

from protocol.metagraph import Axon, MetagraphSnapshot, Neuron
from protocol.synapse import Constraints
from protocol.task import Task, synthetic_variant
from validator.sampling import (
    SYNTHETIC_RATE,
    TaskDraw,
    draw_task,
    instance_seed,
    is_synthetic,
    pick_task,
    sample_miners,
)

HOTKEY = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"


def _tasks(n: int) -> list[Task]:
    return [
        Task(
            task_id=f"task-{i}",
            task_type="rag",
            reference={"reference_answer": f"answer {i}"},
            constraints=Constraints(max_budget_tao=1.0, max_latency_seconds=10.0, allowed_subnets=["sn1"]),
        )
        for i in range(n)
    ]


def test_pick_task_is_sha256_of_hotkey_and_block_mod_len() -> None:
    tasks = _tasks(7)
    for block in (0, 1, 12345, 10**9):
        expected = int(hashlib.sha256(f"{HOTKEY}:{block}".encode()).hexdigest(), 16) % 7
        assert pick_task(HOTKEY, block, tasks) is tasks[expected]


def test_pick_task_spreads_over_the_task_list() -> None:
    tasks = _tasks(5)
    assert {pick_task(HOTKEY, block, tasks).task_id for block in range(200)} == {t.task_id for t in tasks}


def test_pick_task_from_nothing_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="no active tasks"):
        pick_task(HOTKEY, 1, [])


def test_synthetic_rate_is_about_17_5_percent_and_deterministic() -> None:
    decisions = [is_synthetic(HOTKEY, block) for block in range(4000)]
    assert decisions == [is_synthetic(HOTKEY, block) for block in range(4000)]
    assert abs(sum(decisions) / len(decisions) - SYNTHETIC_RATE) < 0.025
    assert not any(is_synthetic(HOTKEY, block, rate=0.0) for block in range(100))


def test_synthetic_variant_has_an_opaque_id_tighter_limits_and_the_same_reference() -> None:
    task = _tasks(1)[0]
    variant = synthetic_variant(task, 42)
    assert variant.task_id.startswith("syn_") and len(variant.task_id) == 12
    int(variant.task_id[4:], 16)
    assert task.task_id not in variant.task_id
    assert variant.constraints.max_budget_tao < task.constraints.max_budget_tao
    assert variant.constraints.max_latency_seconds < task.constraints.max_latency_seconds
    assert variant.constraints.allowed_subnets == task.constraints.allowed_subnets
    assert variant.reference == task.reference
    assert synthetic_variant(task, 42) == variant
    assert synthetic_variant(task, 43).task_id != variant.task_id
    assert task.task_id == "task-0"  # the original is untouched


def test_synthetic_variant_without_budget_keeps_none() -> None:
    task = _tasks(1)[0].model_copy(update={"constraints": Constraints(max_latency_seconds=5.0)})
    assert synthetic_variant(task, 1).constraints.max_budget_tao is None


def _instance(task: Task, seed: int) -> Task:
    return task.model_copy(update={"seed": seed})


def test_the_draw_at_the_real_rate_is_the_pick_the_secret_seed_and_the_synthetic_flag() -> None:
    tasks = _tasks(4)
    draws = [draw_task(HOTKEY, 99, block, tasks) for block in range(4000)]
    assert abs(sum(d.synthetic for d in draws) / len(draws) - SYNTHETIC_RATE) < 0.025
    for block, draw in enumerate(draws[:300]):
        assert draw.base is pick_task(HOTKEY, block, tasks)
        assert draw.seed == instance_seed(99, block, draw.base.task_id) != instance_seed(98, block, draw.base.task_id)
        assert draw.synthetic == is_synthetic(HOTKEY, block)
        sent = draw.task(_instance)
        assert sent.seed == draw.seed and sent.reference == draw.base.reference
        assert sent.task_id.startswith("syn_") == draw.synthetic
        assert sent.hint_tier == draw.tier
        assert sent == TaskDraw(draw.base, draw.seed, draw.synthetic, draw.tier).task(
            _instance
        )  # rebuilt from a record
    assert not any(draw_task(HOTKEY, 99, block, tasks, synthetic_rate=0.0).synthetic for block in range(100))


def _snapshot() -> MetagraphSnapshot:
    neurons = [Neuron(uid=i, hotkey=f"hk{i}", axon=Axon("127.0.0.1", 9000 + i) if i % 4 else None) for i in range(20)]
    neurons.append(Neuron(uid=20, hotkey="me", validator_permit=True, axon=Axon("127.0.0.1", 9999)))
    return MetagraphSnapshot(netuid=1, block=5, neurons=tuple(neurons))


def test_sample_miners_is_deterministic_serving_only_and_excludes_self() -> None:
    snapshot = _snapshot()
    sample = sample_miners(snapshot, 6, seed=7, self_hotkey="me")
    assert sample == sample_miners(snapshot, 6, seed=7, self_hotkey="me")
    assert len(sample) == 6
    assert all(n.axon is not None and n.hotkey != "me" for n in sample)
    assert [n.uid for n in sample] == sorted(n.uid for n in sample)
    assert {tuple(n.uid for n in sample_miners(snapshot, 6, seed=s, self_hotkey="me")) for s in range(10)} != {
        tuple(n.uid for n in sample)
    }


def test_sample_larger_than_the_network_returns_every_serving_miner() -> None:
    sample = sample_miners(_snapshot(), 100, seed=1, self_hotkey="me")
    assert [n.uid for n in sample] == [i for i in range(20) if i % 4]
    assert sample_miners(_snapshot(), 0, seed=1) == []
