"""The margin over the reference, shown: the validator's /metrics (per miner the window's
mean credited margin and how often it beat the reference; where the last weights sent
the emission), the localnet leaderboard and its summary (issue 29)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from support.fakechain import FakeChain
from support.keys import MetagraphBuilder, dev_keypair

from scoring.margin import Payout
from validator.chainview import ChainView
from validator.prometheus import ValidatorMetrics
from validator.state import ExecutionRecord, ValidatorState
from validator.weights import WeightSetter

VALIDATOR = dev_keypair("Alice")
BETTER, COPY, NAIVE = (dev_keypair(f"dagnet-margin-view-{name}") for name in ("better", "copy", "naive"))


def _record(block: int, uid: int, hotkey: str, score: float, reference: float, share: float = 1.0) -> ExecutionRecord:
    margin = score - reference
    return ExecutionRecord(
        block=block, uid=uid, hotkey=hotkey, task_id="dt_inventory", base_task_id="dt_inventory", instance_seed=block,
        plan=None, metrics=None, final_output=None, score={"S": score}, reason=None, reference_S=reference,
        margin=margin, credit=margin * share if margin > 0 else margin, share=share, digest=f"d{uid}",
    )


def _sample(metrics: ValidatorMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_metrics_export_each_miners_mean_margin_and_how_often_it_beat_the_reference():
    metrics = ValidatorMetrics()
    metrics.margins({1: [0.04, 0.0, -0.01, 0.05], 2: [0.0, 0.0], 3: []})
    assert _sample(metrics, "dagnet_validator_margin", uid="1") == pytest.approx(0.02)
    assert _sample(metrics, "dagnet_validator_beats_reference", uid="1") == pytest.approx(0.5)
    assert _sample(metrics, "dagnet_validator_margin", uid="2") == 0.0
    assert _sample(metrics, "dagnet_validator_beats_reference", uid="2") == 0.0
    assert _sample(metrics, "dagnet_validator_margin", uid="3") == 0.0  # no step with a reference score yet


def test_every_payout_kind_is_exported_from_the_start_and_one_holds_after_a_weight_set():
    metrics = ValidatorMetrics()
    assert {kind: _sample(metrics, "dagnet_validator_payout", kind=kind) for kind in Payout} == dict.fromkeys(Payout, 0.0)
    metrics.paid(Payout.BURN)
    assert {kind: _sample(metrics, "dagnet_validator_payout", kind=kind) for kind in Payout} == {
        **dict.fromkeys(Payout, 0.0), Payout.BURN: 1.0}


def _network() -> tuple[FakeChain, dict[str, int]]:
    builder = MetagraphBuilder(netuid=7).validator(VALIDATOR)
    for key in (BETTER, COPY, NAIVE):
        builder.miner(key)
    snapshot = builder.build()
    uids = {name: snapshot.by_hotkey(key.ss58_address).uid for name, key in
            (("better", BETTER), ("copy", COPY), ("naive", NAIVE))}
    return FakeChain(hotkey=VALIDATOR.ss58_address, snapshot=snapshot), uids


def _settled(state: ValidatorState, uids: dict[str, int], *, better_by: float) -> None:
    keys = {"better": BETTER, "copy": COPY, "naive": NAIVE}
    for block in range(10, 20):
        scores = {"better": 0.6 + better_by, "copy": 0.6, "naive": 0.45}
        state.settle_step(block, [_record(block, uids[n], keys[n].ss58_address, s, 0.6) for n, s in scores.items()])


@pytest.mark.parametrize(("better_by", "payout"), [(0.03, Payout.MARGIN), (0.0, Payout.FLOOR_ONLY)])
def test_a_weight_set_exports_where_it_sent_the_emission(tmp_path: Path, better_by: float, payout: Payout):
    chain, uids = _network()
    metrics = ValidatorMetrics()
    state = ValidatorState(tmp_path / "validator.sqlite")
    try:
        _settled(state, uids, better_by=better_by)
        view = ChainView(chain, metrics)
        setter = WeightSetter(view, state, metrics, version_key=1, warmup_full_at=1)

        async def set_once() -> bool:
            await view.sync(chain.head)
            return await setter.set(chain.head, await view.read_hyperparameters())

        assert asyncio.run(set_once())
    finally:
        state.close()
    assert _sample(metrics, "dagnet_validator_payout", kind=payout) == 1.0
    assert sum(_sample(metrics, "dagnet_validator_payout", kind=kind) for kind in Payout) == 1.0
