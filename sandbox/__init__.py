"""Run untrusted Python (from a miner or a tool output) isolated from the caller.

Never in the caller's process, never with its privileges, never with network
access. See ``docs/sandbox.md`` for the isolation layers and what each protects.
"""

from .models import SandboxLimits, SandboxResult, SandboxUnavailable
from .run import PRIVATE_ISOLATION, isolation_available, run_python, run_python_async

__all__ = [
    "PRIVATE_ISOLATION",
    "SandboxLimits",
    "SandboxResult",
    "SandboxUnavailable",
    "isolation_available",
    "run_python",
    "run_python_async",
]
