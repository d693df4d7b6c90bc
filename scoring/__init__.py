"""Deterministic scoring: composite score, output quality, rolling windows, weights."""

from .composite import Score, composite, invalid_score
from .evaluate import score_run
from .quality import Quality, output_quality
from .weights import normalize_weights, to_u16, warmup_scale
from .window import RollingWindow

__all__ = [
    "Quality",
    "RollingWindow",
    "Score",
    "composite",
    "invalid_score",
    "normalize_weights",
    "output_quality",
    "score_run",
    "to_u16",
    "warmup_scale",
]
