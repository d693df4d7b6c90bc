"""A validation step's scoring phase, on final outputs alone (no miners, no execution)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from protocol.run_metrics import RunMetrics
from protocol.task import Task
from validator import judging as step_judging
from validator.judging import JudgingAllowance
from validator.outcome import Candidate

METRICS = RunMetrics(
    completion_ratio=1.0, latency_s=1.0, cost_tao=0.0, retries=0, unplanned_retries=0, timeouts=0, hard_failures=0
)


def score_outputs(
    task: Task, outputs: Mapping[int, dict[str, Any] | None], judging: JudgingAllowance | None = None
) -> list[Any]:
    """Each ``uid -> final output``'s candidate after the step's scoring phase (``.score``, ``.failure``)."""
    candidates = [
        Candidate(
            miner=SimpleNamespace(uid=uid),
            synapse=None,
            check=SimpleNamespace(runnable=True, errors=[]),
            execution=SimpleNamespace(final_output=output, metrics=METRICS),
        )
        for uid, output in outputs.items()
    ]
    asyncio.run(step_judging.score_all(task, candidates, judging))
    return candidates
