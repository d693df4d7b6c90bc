"""The Yuma epoch against small cases worked out by hand (the arithmetic is in the comments)."""

import numpy as np
import pytest

from chain.epoch import EpochInputs, run_epoch, split_emission, weighted_median_col


def _inputs(stake, weights, *, permit, bonds=None, last_update=None, registered=None, last_epoch=50, block=100):
    n = len(stake)
    return EpochInputs(
        block=block,
        stake=np.array(stake, dtype=float),
        weights=np.array(weights, dtype=float),
        bonds=np.zeros((n, n)) if bonds is None else np.array(bonds, dtype=float),
        last_update=np.array(last_update or [90] * n, dtype=float),
        registered_at=np.array(registered or [0] * n, dtype=float),
        validator_permit=np.array(permit, dtype=bool),
        last_epoch_block=last_epoch,
    )


def test_one_honest_validator_pays_miners_by_its_weights_and_earns_all_dividends():
    # One validator: consensus is its own weights, nothing is clipped.
    result = run_epoch(_inputs([100, 0, 0], [[0, 3, 1], [0, 0, 0], [0, 0, 0]], permit=[1, 0, 0]))
    assert result.consensus == pytest.approx([0, 0.75, 0.25])
    assert result.incentive == pytest.approx([0, 0.75, 0.25])
    assert result.trust == pytest.approx([0, 1, 1])
    assert result.validator_trust == pytest.approx([1, 0, 0])
    assert result.dividends == pytest.approx([1, 0, 0])
    # incentive and dividends each sum to 1, so each side gets half of the pot.
    assert result.server_share == pytest.approx([0, 0.375, 0.125])
    assert result.validator_share == pytest.approx([0.5, 0, 0])
    assert result.validator_permit.tolist() == [True, False, False]


def test_outlier_validator_is_clipped_to_the_stake_majority():
    # A (stake .75) splits evenly; B (stake .25) puts everything on uid 2.
    weights = [[0, 0, 1, 1], [0, 0, 1, 0], [0] * 4, [0] * 4]
    result = run_epoch(_inputs([75, 25, 0, 0], weights, permit=[1, 1, 0, 0]))
    # column 2: A says .5 (.75 of stake), B says 1 -> majority value .5; column 3: A .5, B 0 -> .5
    assert result.consensus == pytest.approx([0, 0, 0.5, 0.5])
    # B's 1.0 on uid 2 is clipped to .5: B keeps half its weight.
    assert result.validator_trust == pytest.approx([1.0, 0.5, 0, 0])
    # ranks: uid2 = .75*.5 + .25*.5 = .5; uid3 = .75*.5 = .375 -> normalised by .875
    assert result.incentive == pytest.approx([0, 0, 0.5 / 0.875, 0.375 / 0.875])
    # trust = ranks / preranks: uid2 .5 / (.75*.5 + .25*1) = .8
    assert result.trust == pytest.approx([0, 0, 0.8, 1.0])
    # bonds: uid2 column .375 : .125 -> .75 / .25; uid3 column A only.
    assert result.bonds[:2, 2:] == pytest.approx(np.array([[0.75, 1.0], [0.25, 0.0]]))
    assert result.dividends == pytest.approx([0.75 * 4 / 7 + 3 / 7, 0.25 * 4 / 7, 0, 0])


def test_bonds_are_an_ema_carried_across_epochs():
    # Both validators agree (equal stake), but only A held a bond on uid 2 before.
    weights = [[0, 0, 1], [0, 0, 1], [0, 0, 0]]
    bonds = [[0, 0, 1.0], [0, 0, 0], [0, 0, 0]]
    result = run_epoch(_inputs([50, 50, 0], weights, permit=[1, 1, 0], bonds=bonds))
    # delta = [.5, .5]; ema = .1 * delta + .9 * [1, 0] = [.95, .05]
    assert result.bonds[:, 2] == pytest.approx([0.95, 0.05, 0])
    assert result.dividends == pytest.approx([0.95, 0.05, 0])
    # A second epoch with the same weights moves B's bond on: .1*.5 + .9*.05 = .095
    again = run_epoch(_inputs([50, 50, 0], weights, permit=[1, 1, 0], bonds=result.bonds))
    assert again.bonds[:, 2] == pytest.approx([0.905, 0.095, 0])


def test_bonds_on_a_neuron_registered_since_the_last_epoch_start_over():
    weights = [[0, 0, 1], [0, 0, 1], [0, 0, 0]]
    bonds = [[0, 0, 1.0], [0, 0, 0], [0, 0, 0]]
    result = run_epoch(
        _inputs([50, 50, 0], weights, permit=[1, 1, 0], bonds=bonds, registered=[0, 0, 60], last_epoch=50)
    )
    assert result.bonds[:, 2] == pytest.approx([0.5, 0.5, 0])


def test_weights_from_before_a_registration_and_self_weights_do_not_count():
    # uid 1 re-registered at block 95, after the validator's last weights at 90.
    weights = [[5, 1, 1], [0, 0, 0], [0, 0, 0]]
    result = run_epoch(_inputs([100, 0, 0], weights, permit=[1, 0, 0], registered=[0, 95, 0]))
    assert result.incentive == pytest.approx([0, 0, 1])


def test_inactive_validators_and_no_weights_fall_back_to_stake():
    result = run_epoch(_inputs([30, 10, 0], [[0] * 3] * 3, permit=[1, 1, 0], last_update=[1, 1, 1], block=10_000))
    assert result.incentive.sum() == 0
    assert result.validator_share == pytest.approx([0.75, 0.25, 0])


def test_emission_is_conserved_to_the_rao():
    rng = np.random.default_rng(7)
    n = 40
    stake = rng.uniform(0, 1000, n)
    weights = rng.uniform(0, 1, (n, n))
    result = run_epoch(_inputs(stake, weights, permit=stake > 400))
    for pot in (1, 999, 10**9 * 361, 123_456_789_011):
        servers, validators, owner = split_emission(pot, 0.18, result)
        assert int(servers.sum()) + int(validators.sum()) + owner == pot
        assert owner >= int(pot * 0.18)


def test_weighted_median_ignores_unstaked_rows_and_ties_go_up():
    scores = np.array([[0.2], [0.8], [0.5]])
    assert weighted_median_col(np.array([0.5, 0.5, 0.0]), scores).tolist() == [0.8]
    assert weighted_median_col(np.array([0.6, 0.4, 0.0]), scores).tolist() == [0.2]
    assert weighted_median_col(np.zeros(3), scores).tolist() == [0.0]
