"""Yuma consensus: turning one tempo's weights into incentive, dividends, bonds and emission.

The embedded development chain runs this at each tempo, the way subtensor's
``epoch_dense_mechanism`` does (``pallets/subtensor/src/epoch/run_epoch.rs``,
"original Yuma", liquid alpha and Yuma3 off), in float64 numpy instead of
fixed point. Step by step:

1. ``active``: a uid whose last weights are older than ``activity_cutoff`` blocks
   is inactive. Stake below ``min_stake`` counts as zero; stake is normalised.
2. Validator permits for the *next* epoch go to the ``max_validators`` largest
   non-zero stakes; this epoch uses the permits already held.
3. ``active_stake``: normalised stake of active permit holders only.
4. Weights: rows of non-permit holders dropped, self-weights dropped, weights set
   before their target registered (``last_update[i] <= registered[j]``) dropped,
   rows normalised to sum 1.
5. ``consensus[j]``: the stake-weighted κ-quantile of column ``j`` (κ = 0.5: the
   smallest weight that validators holding more than half the stake give ``j`` at
   least). Weights above consensus are clipped to it.
6. ``ranks = clipped.T @ active_stake``; ``incentive`` is ranks normalised;
   ``trust = ranks / preranks`` (how much of the weight survived clipping);
   ``validator_trust`` is a row's clipped sum.
7. Bonds: ``ΔB = clipped ∘ active_stake`` (rows scaled), column-normalised;
   ``B = α·ΔB + (1−α)·B_prev`` with ``α = 1 − bonds_moving_average``, columns of
   neurons registered since the last epoch reset first; column-normalised.
8. ``dividends = B @ incentive``, normalised.
9. Emission: ``incentive`` and ``dividends`` share one pot normalised by their
   joint sum (so each half gets 50% when both are non-zero); with no usable
   weights at all the validators' half follows stake, as on chain.

Simplifications against subtensor, all deliberate: float64 rather than I32F32
(results agree to about 1e-6); bonds kept column-normalised in float rather
than column max-upscaled u16; no subnet owner self-weight exception; no liquid
alpha, bonds penalty (clipped weights always form bonds, i.e. penalty 1), or
Yuma3; one mechanism per subnet.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

KAPPA = 32_767 / 65_535
"""Subtensor's default κ (u16 32767): the stake majority consensus needs."""
BONDS_MOVING_AVERAGE = 0.9
"""Subtensor's default (900_000 / 1_000_000): a bond keeps 90% of its past each epoch."""


@dataclass(frozen=True, slots=True)
class EpochInputs:
    """The subnet as the epoch reads it; arrays are indexed by uid."""

    block: int
    stake: np.ndarray
    weights: np.ndarray
    """Row ``i`` is validator ``i``'s weights, any non-negative scale."""
    bonds: np.ndarray
    last_update: np.ndarray
    registered_at: np.ndarray
    validator_permit: np.ndarray
    last_epoch_block: int
    activity_cutoff: int = 5_000
    max_validators: int = 64
    min_stake: float = 0.0
    kappa: float = KAPPA
    bonds_moving_average: float = BONDS_MOVING_AVERAGE


@dataclass(frozen=True, slots=True)
class EpochResult:
    active: np.ndarray
    stake_weight: np.ndarray
    validator_permit: np.ndarray
    """Permits for the next epoch."""
    consensus: np.ndarray
    validator_trust: np.ndarray
    trust: np.ndarray
    incentive: np.ndarray
    dividends: np.ndarray
    bonds: np.ndarray
    """Rows of uids without a new permit are zero."""
    server_share: np.ndarray
    validator_share: np.ndarray
    """Fractions of the pot: ``server_share.sum() + validator_share.sum() == 1`` (or 0)."""


def run_epoch(inputs: EpochInputs) -> EpochResult:
    n = len(inputs.stake)
    active = inputs.last_update + inputs.activity_cutoff >= inputs.block
    stake = np.where(inputs.stake >= inputs.min_stake, inputs.stake.astype(float), 0.0)
    stake = _normalize(stake)
    new_permit = _top_k_nonzero(stake, inputs.max_validators)
    permit = inputs.validator_permit.astype(bool)
    active_stake = _normalize(np.where(active & permit, stake, 0.0))

    weights = _usable_weights(inputs, permit)
    consensus = weighted_median_col(active_stake, weights, inputs.kappa)
    clipped = np.minimum(weights, consensus[None, :])
    validator_trust = clipped.sum(axis=1)
    preranks = weights.T @ active_stake
    ranks = clipped.T @ active_stake
    trust = np.divide(ranks, preranks, out=np.zeros(n), where=preranks > 0)
    incentive = _normalize(ranks)

    bonds = _ema_bonds(inputs, clipped, active_stake)
    dividends = _normalize(bonds @ incentive)
    bonds[~new_permit] = 0.0

    server, validator = _shares(incentive, dividends, active_stake, stake)
    return EpochResult(
        active=active,
        stake_weight=stake,
        validator_permit=new_permit,
        consensus=consensus,
        validator_trust=validator_trust,
        trust=trust,
        incentive=incentive,
        dividends=dividends,
        bonds=bonds,
        server_share=server,
        validator_share=validator,
    )


def weighted_median_col(stake: np.ndarray, scores: np.ndarray, kappa: float = KAPPA) -> np.ndarray:
    """Per column, the smallest score such that more than ``1 - kappa`` of the stake
    gives that score or less: subtensor's ``weighted_median_col``. Rows with zero
    stake take no part; with no stake at all every column is 0."""
    rows = stake > 0
    columns = scores.shape[1]
    if not rows.any():
        return np.zeros(columns)
    s = stake[rows] / stake[rows].sum()
    w = scores[rows]
    order = np.argsort(w, axis=0, kind="stable")
    sorted_scores = np.take_along_axis(w, order, axis=0)
    cumulative = np.cumsum(s[order], axis=0)
    first_above = np.argmax(cumulative > 1.0 - kappa, axis=0)
    return sorted_scores[first_above, np.arange(columns)]


def split_emission(pot: int, owner_cut: float, result: EpochResult) -> tuple[np.ndarray, np.ndarray, int]:
    """Whole-unit (rao) payouts ``(to_servers, to_validators, to_owner)`` of ``pot``.

    The owner takes ``owner_cut`` first; the rest follows the epoch's shares,
    rounded down, and the rounding dust goes to the owner too, so the three
    parts always add up to ``pot`` exactly.
    """
    distributable = int(pot * (1.0 - owner_cut))
    servers = np.floor(result.server_share * distributable).astype(np.int64)
    validators = np.floor(result.validator_share * distributable).astype(np.int64)
    owner = pot - int(servers.sum()) - int(validators.sum())
    return servers, validators, owner


def _usable_weights(inputs: EpochInputs, permit: np.ndarray) -> np.ndarray:
    weights = inputs.weights.astype(float).copy()
    weights[~permit] = 0.0
    np.fill_diagonal(weights, 0.0)
    outdated = inputs.last_update[:, None] <= inputs.registered_at[None, :]
    weights[outdated] = 0.0
    return _normalize_rows(weights)


def _ema_bonds(inputs: EpochInputs, clipped: np.ndarray, active_stake: np.ndarray) -> np.ndarray:
    previous = inputs.bonds.astype(float).copy()
    previous[:, inputs.registered_at >= inputs.last_epoch_block + 1] = 0.0
    previous = _normalize_cols(previous)
    delta = _normalize_cols(clipped * active_stake[:, None])
    alpha = 1.0 - inputs.bonds_moving_average
    return _normalize_cols(alpha * delta + (1.0 - alpha) * previous)


def _shares(
    incentive: np.ndarray, dividends: np.ndarray, active_stake: np.ndarray, stake: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    total = incentive.sum() + dividends.sum()
    if total > 0:
        return incentive / total, dividends / total
    fallback = stake if not active_stake.any() else active_stake
    return np.zeros_like(incentive), fallback.copy()


def _top_k_nonzero(stake: np.ndarray, k: int) -> np.ndarray:
    order = np.argsort(-stake, kind="stable")[:k]
    permit = np.zeros(len(stake), dtype=bool)
    permit[order] = True
    return permit & (stake > 0)


def _normalize(x: np.ndarray) -> np.ndarray:
    total = x.sum()
    return x / total if total > 0 else np.zeros_like(x, dtype=float)


def _normalize_rows(m: np.ndarray) -> np.ndarray:
    sums = m.sum(axis=1, keepdims=True)
    return np.divide(m, sums, out=np.zeros_like(m), where=sums > 0)


def _normalize_cols(m: np.ndarray) -> np.ndarray:
    sums = m.sum(axis=0, keepdims=True)
    return np.divide(m, sums, out=np.zeros_like(m), where=sums > 0)
