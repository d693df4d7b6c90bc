"""The only layer that speaks to a chain (docs/architecture.md, docs/chain.md)."""

from .base import Chain, ChainError, Hyperparameters, WeightsResult
from .network import Network, parse_network

__all__ = ["Chain", "ChainError", "Hyperparameters", "Network", "WeightsResult", "parse_network"]
