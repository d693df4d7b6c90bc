"""The only layer that speaks to a chain (docs/architecture.md)."""

from .base import Chain, ChainError, Hyperparameters, WeightsResult

__all__ = ["Chain", "ChainError", "Hyperparameters", "WeightsResult"]
