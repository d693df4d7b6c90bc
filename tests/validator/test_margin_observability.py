"""The margin over the reference, shown: the validator's /metrics (per miner the window's
mean credited margin and how often it beat the reference; where the last weights sent
the emission), the localnet leaderboard and its summary (issue 29)."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from scoring.margin import K_SE, Payout, window_means
from scoring.worlds import bar, clustered, tallies
from support.fakechain import FakeChain
from support.keys import MetagraphBuilder, dev_keypair
from validator.chainview import ChainView
from validator.prometheus import ValidatorMetrics
from validator.state import ExecutionRecord, ValidatorState
from validator.weights import WeightSetter

VALIDATOR = dev_keypair("Alice")
_PARTS = ("S", "S_success", "S_cost", "S_latency", "S_reliability")
BETTER, COPY, NAIVE = (dev_keypair(f"dagnet-margin-view-{name}") for name in ("better", "copy", "naive"))


def _record(block: int, uid: int, hotkey: str, score: float, reference: float, share: float = 1.0) -> ExecutionRecord:
    margin = score - reference
    return ExecutionRecord(
        block=block,
        uid=uid,
        hotkey=hotkey,
        task_id="dt_inventory",
        base_task_id="dt_inventory",
        instance_seed=block,
        plan=None,
        metrics=None,
        final_output=None,
        score=dict.fromkeys(_PARTS, score),
        reason=None,
        reference_S=reference,
        margin=margin,
        credit=margin * share if margin > 0 else margin,
        share=share,
        digest=f"d{uid}",
    )


def _sample(metrics: ValidatorMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_metrics_export_each_miners_mean_margin_its_bar_and_how_often_it_beat_the_reference():
    metrics = ValidatorMetrics()
    steps = {1: [0.04, 0.0, -0.01, 0.05], 2: [0.0, 0.0], 3: []}
    worlds = {1: [0, 0, 1, 2], 2: [0, 1], 3: []}
    metrics.margins({uid: window_means([], tallies(m, worlds[uid])) for uid, m in steps.items()}, steps)
    assert _sample(metrics, "dagnet_validator_margin", uid="1") == pytest.approx(0.02)
    # Three worlds: the error over them, times the bar for three (4.53): what a beater must exceed.
    mean, se, _ = clustered(tallies(steps[1], worlds[1]))
    assert _sample(metrics, "dagnet_validator_margin_bar", uid="1") == pytest.approx(bar(K_SE, 3) * se)
    assert _sample(metrics, "dagnet_validator_margin_bar", uid="3") == math.inf  # no world yet
    assert _sample(metrics, "dagnet_validator_beats_reference", uid="1") == pytest.approx(0.5)
    assert _sample(metrics, "dagnet_validator_margin", uid="2") == 0.0
    assert _sample(metrics, "dagnet_validator_beats_reference", uid="2") == 0.0
    assert _sample(metrics, "dagnet_validator_margin", uid="3") == 0.0  # no step with a reference score yet


def test_every_payout_kind_is_exported_from_the_start_and_one_holds_after_a_weight_set():
    metrics = ValidatorMetrics()
    assert {kind: _sample(metrics, "dagnet_validator_payout", kind=kind) for kind in Payout} == dict.fromkeys(
        Payout, 0.0
    )
    metrics.paid(Payout.BURN)
    assert {kind: _sample(metrics, "dagnet_validator_payout", kind=kind) for kind in Payout} == {
        **dict.fromkeys(Payout, 0.0),
        Payout.BURN: 1.0,
    }


def _network() -> tuple[FakeChain, dict[str, int]]:
    builder = MetagraphBuilder(netuid=7).validator(VALIDATOR)
    for key in (BETTER, COPY, NAIVE):
        builder.miner(key)
    snapshot = builder.build()
    uids = {
        name: snapshot.by_hotkey(key.ss58_address).uid
        for name, key in (("better", BETTER), ("copy", COPY), ("naive", NAIVE))
    }
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
        view = ChainView(chain, metrics, version_key=1)
        setter = WeightSetter(view, state, metrics, version_key=1, warmup_full_at=1)

        async def set_once() -> bool:
            await view.sync(chain.head)
            return await setter.set(chain.head, await view.read_hyperparameters())

        assert asyncio.run(set_once())
    finally:
        state.close()
    assert _sample(metrics, "dagnet_validator_payout", kind=payout) == 1.0
    assert sum(_sample(metrics, "dagnet_validator_payout", kind=kind) for kind in Payout) == 1.0


def test_a_restarted_validator_exports_where_its_last_weights_sent_the_emission(tmp_path: Path):
    chain, uids = _network()
    state = ValidatorState(tmp_path / "validator.sqlite")
    try:
        state.weights_accepted(20, {0: 0.95, uids["copy"]: 0.05}, Payout.BURN, burn_uid=0)
        metrics = ValidatorMetrics()
        WeightSetter(ChainView(chain, metrics, version_key=1), state, metrics, version_key=1, warmup_full_at=1)
    finally:
        state.close()
    assert _sample(metrics, "dagnet_validator_payout", kind=Payout.BURN) == 1.0


# -- the localnet leaderboard and summary ------------------------------------------------------


def _rows(margins: dict[str, tuple[float, float, float]]) -> list[dict]:
    return [
        {
            "uid": uid,
            "strategy": name,
            "hotkey": "5F",
            "steps_scored": 10,
            "mean_S": 0.6,
            "mean_S_success": 1.0,
            "mean_S_cost": 0.5,
            "mean_S_latency": 0.5,
            "mean_S_reliability": 1.0,
            "weight": weight,
            "incentive": weight,
            "emission": weight,
            "mean_margin": margin,
            "beats_reference": beats,
        }
        for uid, (name, (margin, beats, weight)) in enumerate(margins.items(), start=1)
    ]


def test_the_localnet_summary_says_who_beat_the_reference_by_how_much_and_where_the_emission_went():
    from rich.console import Console

    from neurons.localnet import LEGEND, Reached, margin_summary, render

    reached = Reached(
        run_dir="/tmp/x",
        block=130,
        last_weights_block=120,
        payout="margin",
        miners=_rows({"learner": (0.0213, 0.4, 0.95), "good": (0.0, 0.0, 0.049), "naive": (-0.12, 0.05, 0.001)}),
    )
    assert margin_summary(reached) == [
        "ahead of the reference now: uid 1 learner by +0.021 (40% of steps)",
        "last weights, set at block 120 (10 blocks ago): 95% to the 1 that beat the reference, "
        "5% as the floor to 2 at or below the reference",
    ]
    console = Console(width=140, record=True, color_system=None)
    console.print(render(reached, 140))
    shown = console.export_text()
    assert (
        "margin" in shown and "+0.021" in shown and "-0.120" in shown and "ahead of the reference now: uid 1" in shown
    )
    assert "weights set at block 120 (10 blocks ago)" in shown and LEGEND in shown

    burnt = Reached(
        run_dir="/tmp/x",
        block=41,
        last_weights_block=40,
        payout="burn",
        burn_uid=0,
        burned=0.95,
        miners=_rows({"good": (0.0, 0.0, 0.025), "copy": (0.0, 0.0, 0.025)}),
    )
    assert margin_summary(burnt) == [
        "nobody ahead of the reference now",
        "last weights, set at block 40 (1 block ago): 95% burned to the subnet owner's uid 0, "
        "5% as the floor to 2 at or below the reference",
    ]
    assert margin_summary(Reached(run_dir="/tmp/x"))[1] == "last weights: none set yet"


def test_the_payout_line_reads_the_weights_not_the_window_that_moved_on_since():
    """Issue 38: the board said 'beat the reference: uid 5 learner by +0.245' above '50 % as the
    floor' while learner and good held 0.500 each: the weights came from an earlier block, when
    nobody beat the reference, and the floor was counted from the window as it is now."""
    from neurons.localnet import Reached, margin_summary

    later = Reached(
        run_dir="/tmp/x",
        block=95,
        last_weights_block=60,
        payout="floor_only",
        miners=_rows({"learner": (0.245, 0.6, 0.5), "good": (0.0, 0.0, 0.5), "naive": (-0.2, 0.0, 0.0)}),
    )
    assert margin_summary(later) == [
        "ahead of the reference now: uid 1 learner by +0.245 (60% of steps)",
        "last weights, set at block 60 (35 blocks ago): nobody beat the reference and the owner's hotkey is not "
        "on the subnet, so 100% as the floor to 2 at or below the reference",
    ]


def test_the_localnet_reads_each_miners_margin_and_the_payout_from_the_validators_state(tmp_path: Path):
    from neurons.localnet import MinerInfo, Reached, _observe

    chain, uids = _network()
    path = tmp_path / "validator.sqlite"
    state = ValidatorState(path)
    try:
        _settled(state, uids, better_by=0.03)
        state.weights_accepted(20, {uids["better"]: 0.95, uids["copy"]: 0.05}, Payout.MARGIN)
    finally:
        state.close()
    miners = [
        MinerInfo(name, key.ss58_address, uids[name])
        for name, key in (("better", BETTER), ("copy", COPY), ("naive", NAIVE))
    ]
    reached = Reached(run_dir=str(tmp_path))
    asyncio.run(_observe(chain, path, miners, reached))
    rows = {row["strategy"]: row for row in reached.miners}
    assert rows["better"]["mean_margin"] == pytest.approx(0.03) and rows["better"]["beats_reference"] == 1.0
    assert rows["copy"]["mean_margin"] == 0.0 and rows["copy"]["beats_reference"] == 0.0
    assert rows["naive"]["mean_margin"] == pytest.approx(-0.15)
    assert reached.payout == "margin" and reached.summary()["payout"] == "margin"


def test_a_weight_set_that_pays_nobody_for_a_margin_says_who_is_closest_and_what_it_must_clear():
    """The log line of a weight-set where nobody beats the reference names the leader
    nearest to it, its margin and the bar counted in worlds; a later copy is never named."""
    from validator.weights import Paid, describe

    ahead = window_means([0.8] * 4, tallies([0.03, 0.01, 0.02, 0.0], [0, 1, 2, 3]))  # +0.015, not clear of 4 worlds
    behind = window_means([0.7] * 4, tallies([-0.1] * 4, [0, 1, 2, 3]))
    fresh = window_means([0.9], tallies([0.2], [3]))  # one world: no bar yet
    paid = Paid({0: 0.95, 1: 0.025, 2: 0.025}, Payout.BURN, {1: ahead, 2: behind, 3: fresh}, 0, {1: 1, 2: 2, 3: 1})
    line = describe(paid)
    assert line.startswith("nobody beat the reference: 95 % burned to the owner's uid 0")
    assert line.endswith(f"; closest: uid 1, margin +0.015 against a bar of {ahead.margin - ahead.clear:.3f}")
    alone = Paid({3: 1.0}, Payout.FLOOR_ONLY, {3: fresh}, None, {3: 3})
    assert describe(alone).endswith("closest: uid 3, margin +0.200 against no bar yet (fewer than two worlds)")
