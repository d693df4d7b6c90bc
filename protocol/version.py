"""What software a neuron runs: the dagnet package's version and the scoring version.

The package version names the code (``dagnet --version``, the neurons' first log line,
their ``/health``); the scoring version (:data:`protocol.synapse.SCORING_VERSION`) is
what a validator publishes as ``version_key`` with its weights. A subnet owner who
changes scoring raises the chain's ``weights_version`` hyperparameter to it, and the
chain then refuses weights set with an older key: :func:`upgrade_needed` says so first.
"""

from __future__ import annotations

from importlib import metadata

from .synapse import SCORING_VERSION

UNKNOWN = "0+unknown"
"""The package version of a source tree that was never installed."""


def package_version() -> str:
    try:
        return metadata.version("dagnet")
    except metadata.PackageNotFoundError:
        return UNKNOWN


def version_fields() -> str:
    """``version=0.1.0 scoring_version=1``: for a start-up line."""
    return f"version={package_version()} scoring_version={SCORING_VERSION}"


def upgrade_needed(chain_weights_version: int, version_key: int = SCORING_VERSION) -> str | None:
    """Why this code is out of date for the chain (it expects a newer ``version_key``
    than ``version_key``), or ``None`` when it is not."""
    if chain_weights_version <= version_key:
        return None
    return (
        f"the chain expects weights_version {chain_weights_version}, this code publishes "
        f"version_key {version_key} (dagnet {package_version()}): upgrade dagnet (docs/operating.md#upgrading)"
    )
