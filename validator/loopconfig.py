"""How the validator's loop runs: what a step samples and sends, how often the head is
read, how weights warm up (the settings a process passes to
:class:`~validator.loop.ValidatorLoop`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from protocol.hints import HintTier
from protocol.synapse import SCORING_VERSION

from .sampling import SYNTHETIC_RATE
from .settings import setting_default
from .validation import StepBounds


@dataclass(frozen=True, slots=True)
class LoopConfig:
    """The loop's own config; every default an operator can set is the settings model's
    (:mod:`validator.settings`), read from there rather than written again."""

    sample_size: int = setting_default("sample_size")
    """Miners queried per step; a subnet with fewer serving miners is queried whole."""
    exec_concurrency: int = setting_default("exec_concurrency")
    version_key: int = SCORING_VERSION
    poll_s: float = setting_default("poll_s")
    """How often the loop asks for the chain head while it waits for a new block."""
    synthetic_rate: float = SYNTHETIC_RATE
    tier_shares: Mapping[HintTier, float] = field(default_factory=lambda: setting_default("tier_shares"))
    """The share of steps sent at each hint tier (:func:`~validator.sampling.draw_tier`)."""
    warmup_full_at: int = 20
    step_bounds: StepBounds | None = None
    """Each step's shared work and deadline (:class:`~validator.validation.StepBounds`); ``None``: unbounded."""
