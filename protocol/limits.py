"""Size limits shared by validators, miners and the CLI (validator-side defaults)."""

from __future__ import annotations

from dataclasses import dataclass

KIB = 1024
MIB = 1024 * KIB

OUTPUT_TEXT_MAX_BYTES = 16 * KIB
OUTPUT_CODE_MAX_BYTES = 64 * KIB
OUTPUT_METADATA_MAX_BYTES = 16 * KIB


@dataclass(frozen=True, slots=True)
class Limits:
    """Configurable ceilings applied to anything a peer sends."""

    max_response_bytes: int = 1 * MIB
    max_nodes: int = 256
    max_edges: int = 4096
    max_param_depth: int = 16
    max_params_bytes: int = 256 * KIB
    """One node's resolved params as compact JSON, decided from the referenced outputs'
    sizes before the params are built; a node over it is blocked."""
    max_request_bytes: int = 1 * MIB
    """Any request body the validator sends; a larger one is refused unsent."""


DEFAULT_LIMITS = Limits()
