"""The workflow plan a miner returns: nodes, edges, error handling.

These models check the *shape* of a plan. Graph rules (unique ids, dangling
edges, cycles, DataRef ancestry, limits) live in :mod:`protocol.validation`, so
a structurally sound but invalid plan can still be reported on precisely.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

NODE_ID = r"[A-Za-z0-9_-]{1,64}"
"""A node id, unanchored: the one rule plans, task hints and DataRefs share."""
NODE_ID_PATTERN = rf"^{NODE_ID}$"


class PlanNode(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=NODE_ID_PATTERN)
    subnet: str = Field(min_length=1, max_length=64)
    action: str = Field(min_length=1, max_length=128)
    params: dict[str, Any] = Field(default_factory=dict)
    estimated_cost: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    estimated_latency: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    touches: list[str] = Field(default_factory=list)
    parallel_safe: bool = True


class Edge(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    source: str = Field(alias="from")
    to: str


class ErrorPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    retry_count: int = Field(default=0, ge=0, le=10)
    timeout_seconds: float | None = Field(default=None, gt=0, le=3600, allow_inf_nan=False)


class WorkflowPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    nodes: list[PlanNode]
    edges: list[Edge] = Field(default_factory=list)
    error_handling: dict[str, ErrorPolicy] = Field(default_factory=dict)
    output_node: str | None = None
    max_parallel: int | None = Field(default=None, ge=1)

    def policy(self, node_id: str) -> ErrorPolicy:
        return self.error_handling.get(node_id) or _DEFAULT_POLICY

    def estimated_cost(self) -> float:
        return sum(node.estimated_cost for node in self.nodes)

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True)


_DEFAULT_POLICY = ErrorPolicy()
