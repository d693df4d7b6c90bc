"""The node-runner interface: how the executor gets one resolved node run.

The executor knows nothing about transport. A runner may call an in-process
tool registry (``dagnet run``), or the tool providers of a subnet over HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .output import NodeOutput


@dataclass(slots=True)
class NodeCall:
    """One attempt at one node, with its DataRefs already resolved."""

    task_id: str
    node_id: str
    subnet: str
    action: str
    params: dict
    timeout_seconds: float
    attempt: int  # 1-based


@dataclass(slots=True)
class NodeResult:
    """What one attempt produced.

    ``output`` is ``None`` exactly when the attempt failed; ``error`` then says why.
    Runners validate what they receive (``NodeOutput``) so oversize or malformed
    output arrives here as a failure, never truncated. ``unplanned_retries`` counts
    transport retries the runner made on its own.
    """

    output: NodeOutput | None
    cost_tao: float = 0.0
    error: str | None = None
    unplanned_retries: int = 0


class NodeRunner(Protocol):
    async def run(self, call: NodeCall) -> NodeResult: ...
