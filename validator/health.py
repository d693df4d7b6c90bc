"""Whether a validator is doing its job: the conditions under which ``/health`` says ``degraded``.

Pure: :func:`assess` reads a :class:`HealthInputs` (what the loop knows, taken at one
moment) and returns :class:`Health`, ``ok`` or ``degraded`` with one :class:`Reason` per
condition that holds. ``neurons/validator.py`` builds the inputs from the running loop for
``/health``, and :class:`~validator.prometheus.ValidatorMetrics` exports one 0/1 gauge per
reason code (``dagnet_validator_degraded{reason=...}``) that the alert rules watch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from protocol.metagraph import MetagraphSnapshot
from protocol.outcomes import StepOutcome

if TYPE_CHECKING:
    from .loop import ValidatorLoop
    from .prometheus import ValidatorMetrics

INFRASTRUCTURE_STREAK = 5
"""Consecutive infrastructure-failed steps after which the validator is degraded."""
WEIGHTS_STALE_TEMPOS = 2
"""Tempos without accepted weights after which the validator is degraded."""
METAGRAPH_STALE_S = 120.0
"""Seconds without a metagraph read (about ten 12 s blocks) after which the chain counts as unreachable."""

INFRASTRUCTURE = "infrastructure_failures"
CHAIN_UNREACHABLE = "chain_unreachable"
NO_PERMIT = "no_validator_permit"
WEIGHTS_STALE = "weights_stale"
SANDBOX_UNAVAILABLE = "sandbox_unavailable"
STATE_UNWRITABLE = "state_unwritable"
REASONS = (INFRASTRUCTURE, CHAIN_UNREACHABLE, NO_PERMIT, WEIGHTS_STALE, SANDBOX_UNAVAILABLE, STATE_UNWRITABLE)
"""Every reason code, the label values of ``dagnet_validator_degraded``."""


@dataclass(frozen=True, slots=True)
class Reason:
    code: str
    """One of :data:`REASONS`."""
    message: str
    """What a person reads: the condition and the figures behind it."""


@dataclass(frozen=True, slots=True)
class Health:
    reasons: tuple[Reason, ...] = ()

    @property
    def status(self) -> str:
        return "degraded" if self.reasons else "ok"

    def codes(self) -> frozenset[str]:
        return frozenset(reason.code for reason in self.reasons)


@dataclass(frozen=True, slots=True)
class HealthInputs:
    """What the validator knows at one moment."""

    hotkey: str
    recent_steps: Sequence[str] = ()
    """How recent steps ended (``settled``, ``idle``, ``infrastructure``), newest last."""
    snapshot: MetagraphSnapshot | None = None
    """The last metagraph read; ``None`` before the first."""
    metagraph_age_s: float | None = None
    """Seconds since the last metagraph read; ``None`` before the first."""
    uptime_s: float = 0.0
    tempo: int | None = None
    """The subnet's tempo as last read; ``None`` before the first read."""
    last_weights_block: int | None = None
    """The block at which weights were last accepted; ``None``: never."""
    first_block: int | None = None
    """The block of the first metagraph this process read: weights are due from there when none were ever set."""
    sandbox_problem: str | None = None
    """Why code cannot be judged here; ``None`` when it can (or is not known yet)."""
    state_problem: str | None = None
    """Why the last write to the state file failed (a full disk); ``None`` once one succeeds."""
    chain_problem: str | None = None
    """The last failed metagraph read's error (it names the chain, and a subnet that does
    not exist on it); ``None`` once a read succeeds."""

    @classmethod
    def of(
        cls, loop: ValidatorLoop, metrics: ValidatorMetrics, sandbox: asyncio.Future[str | None] | None
    ) -> HealthInputs:
        """What the running ``loop`` knows now; ``sandbox`` is the start-up sandbox check."""
        hyper = loop.hyperparameters
        return cls(
            hotkey=loop.hotkey,
            recent_steps=tuple(loop.step_outcomes),
            snapshot=loop.snapshot,
            metagraph_age_s=metrics.metagraph_age_s(),
            uptime_s=metrics.uptime_s(),
            tempo=None if hyper is None else hyper.tempo,
            last_weights_block=loop.state.last_weights_block(),
            first_block=metrics.first_block,
            sandbox_problem=_settled(sandbox),
            state_problem=loop.state.write_problem,
            chain_problem=loop.view.chain_problem,
        )


def _settled(check: asyncio.Future[str | None] | None) -> str | None:
    if check is None or not check.done() or check.cancelled():
        return None
    return check.result()


def assess(inputs: HealthInputs) -> Health:
    """Every condition that makes this validator degraded, in :data:`REASONS` order."""
    found = (
        _infrastructure(inputs.recent_steps),
        _chain(inputs.metagraph_age_s, inputs.uptime_s, inputs.chain_problem),
        _permit(inputs.hotkey, inputs.snapshot),
        _weights(inputs),
        None
        if inputs.sandbox_problem is None
        else Reason(SANDBOX_UNAVAILABLE, f"sandbox unavailable: {inputs.sandbox_problem}"),
        None
        if inputs.state_problem is None
        else Reason(
            STATE_UNWRITABLE,
            f"{inputs.state_problem}: steps are skipped, nothing of them stored, until a write succeeds",
        ),
    )
    return Health(tuple(reason for reason in found if reason is not None))


def _infrastructure(steps: Sequence[str]) -> Reason | None:
    last = list(steps)[-INFRASTRUCTURE_STREAK:]
    if len(last) < INFRASTRUCTURE_STREAK or any(step != StepOutcome.INFRASTRUCTURE for step in last):
        return None
    return Reason(
        INFRASTRUCTURE,
        f"the last {INFRASTRUCTURE_STREAK} steps failed for infrastructure reasons (chain, execution or scorer): see the log",
    )


def _chain(age_s: float | None, uptime_s: float, problem: str | None) -> Reason | None:
    why = problem or "is the chain reachable?"
    if age_s is None and uptime_s > METAGRAPH_STALE_S:
        return Reason(CHAIN_UNREACHABLE, f"no metagraph read since the start, {uptime_s:.0f} s ago: {why}")
    if age_s is not None and age_s > METAGRAPH_STALE_S:
        return Reason(CHAIN_UNREACHABLE, f"no metagraph read for {age_s:.0f} s: {why}")
    return None


def _permit(hotkey: str, snapshot: MetagraphSnapshot | None) -> Reason | None:
    if snapshot is None:
        return None  # nothing read yet: the chain reason speaks for that
    neuron = snapshot.by_hotkey(hotkey)
    if neuron is None:
        return Reason(NO_PERMIT, f"hotkey {hotkey} is not registered on netuid {snapshot.netuid}")
    if not neuron.validator_permit:
        return Reason(
            NO_PERMIT,
            f"hotkey {hotkey} (uid {neuron.uid}) has no validator permit on netuid {snapshot.netuid}: "
            "its weights do not count (stake more, or wait for the next epoch)",
        )
    return None


def _weights(inputs: HealthInputs) -> Reason | None:
    tempo, snapshot = inputs.tempo, inputs.snapshot
    if tempo is None or tempo <= 0 or snapshot is None:
        return None
    since = inputs.last_weights_block if inputs.last_weights_block is not None else inputs.first_block
    if since is None:
        return None
    blocks = snapshot.block - since
    allowed = WEIGHTS_STALE_TEMPOS * tempo
    if blocks <= allowed:
        return None
    if inputs.last_weights_block is None:
        what = f"no weights accepted since this validator started at block {since}, {blocks} blocks ago"
    else:
        what = f"no weights accepted for {blocks} blocks (last at block {since})"
    return Reason(WEIGHTS_STALE, f"{what}: more than {WEIGHTS_STALE_TEMPOS} tempos of {tempo}")
