"""Re-scoring a stored execution record, to check it bit for bit.

The record holds the step's task draw (base task id, instance seed, synthetic or
not, hint tier, and the tempo of a drawn family), the measured metrics and the final
output; the task source rebuilds the same task from the draw, at the recorded tier
(:func:`recorded_task`), and the same scorer the step used scores it again. Anyone
holding the validator's state file can rerun the judgement and compare it with
what was settled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from protocol.task import Task
from scoring.composite import invalid_score
from scoring.evaluate import saved_metrics, score_run

from .sampling import DrawnFamilies, TaskDraw, TaskSource, source_of
from .state import ExecutionRecord, canonical_json


@dataclass(frozen=True, slots=True)
class Replay:
    record_id: int | None
    stored: dict[str, Any]
    recomputed: dict[str, Any]

    @property
    def identical(self) -> bool:
        return canonical_json(self.stored) == canonical_json(self.recomputed)


def recorded_task(
    record: ExecutionRecord, source: TaskSource, *, drawn: DrawnFamilies | None = None, secret: int = 0
) -> Task:
    """The task ``record``'s step sent, rebuilt from its draw: a curated family from
    ``source``, a drawn one from ``drawn(secret, record.drawn_tempo)``. Raises
    ``KeyError`` when the family is in neither."""
    origin = source_of(record.drawn_tempo, source, drawn, secret)
    base = next((t for t in origin.tasks() if t.task_id == record.base_task_id), None)
    if base is None:
        where = "the task source" if record.drawn_tempo is None else f"the families drawn for tempo {record.drawn_tempo}"
        raise KeyError(f"task {record.base_task_id!r} is not in {where}")
    return TaskDraw(base, record.instance_seed, record.synthetic, record.hint_tier, record.drawn_tempo).task(
        origin.instance
    )


def replay(
    record: ExecutionRecord, source: TaskSource, *, drawn: DrawnFamilies | None = None, secret: int = 0
) -> Replay:
    """Score ``record`` again on :func:`recorded_task`; raises ``KeyError`` when its task
    cannot be rebuilt."""
    if record.reason is not None or record.metrics is None:
        recomputed = invalid_score(record.reason or "invalid response")
    else:
        task = recorded_task(record, source, drawn=drawn, secret=secret)
        recomputed = score_run(task, metrics=saved_metrics(record.metrics), final_output=record.final_output)
    return Replay(record.id, record.score, recomputed.model_dump(mode="json"))
