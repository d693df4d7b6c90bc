"""Run untrusted Python (from a miner or a tool output) isolated from the caller.

Never in the caller's process, never with its privileges, never with network
access. See ``docs/sandbox.md`` for the isolation layers and what each protects.
"""

from .models import SandboxLimits, SandboxResult, SandboxUnavailable
from .run import (
    PRIVATE_ISOLATION,
    RunStopped,
    isolation_available,
    run_python,
    run_python_async,
    stopping_at,
)

__all__ = [
    "PRIVATE_ISOLATION",
    "RunStopped",
    "SandboxLimits",
    "SandboxResult",
    "SandboxUnavailable",
    "isolation_available",
    "run_python",
    "run_python_async",
    "stopping_at",
]
