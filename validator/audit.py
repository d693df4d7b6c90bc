"""Re-scoring a stored execution record, to check it bit for bit.

The record holds the step's task draw (base task id, instance seed, synthetic or
not), the measured metrics and the final output; the task source rebuilds the same
task from the draw, and the same scorer the step used scores it again. Anyone
holding the validator's state file can rerun the judgement and compare it with
what was settled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scoring.composite import invalid_score
from scoring.evaluate import saved_metrics, score_run

from .sampling import TaskSource
from .sampling import TaskDraw
from .state import ExecutionRecord, canonical_json


@dataclass(frozen=True, slots=True)
class Replay:
    record_id: int | None
    stored: dict[str, Any]
    recomputed: dict[str, Any]

    @property
    def identical(self) -> bool:
        return canonical_json(self.stored) == canonical_json(self.recomputed)


def replay(record: ExecutionRecord, source: TaskSource) -> Replay:
    """Score ``record`` again; raises ``KeyError`` when its task is not in ``source``."""
    if record.reason is not None or record.metrics is None:
        recomputed = invalid_score(record.reason or "invalid response")
    else:
        base = next((t for t in source.tasks() if t.task_id == record.base_task_id), None)
        if base is None:
            raise KeyError(f"task {record.base_task_id!r} is not in the task source")
        task = TaskDraw(base, record.instance_seed, record.synthetic).task(source.instance)
        recomputed = score_run(task, metrics=saved_metrics(record.metrics), final_output=record.final_output)
    return Replay(record.id, record.score, recomputed.model_dump(mode="json"))
