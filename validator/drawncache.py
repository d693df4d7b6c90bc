"""The families drawn for the current tempo, drawn (and checked) once per tempo."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from protocol.task import Task

from .sampling import DrawnFamilies, TaskSource

log = logging.getLogger(__name__)


class DrawnCache:
    """:data:`~validator.sampling.DrawnFamilies` remembered for one tempo: drawing and
    checking a tempo's families runs their reference plans, so it happens once, the
    first time a step of that tempo asks, and is kept until the next tempo."""

    def __init__(self, families: DrawnFamilies) -> None:
        self.families = families
        self._kept: tuple[int, TaskSource] | None = None

    def source(self, secret: int, index: int) -> TaskSource:
        """The families drawn for tempo ``index``."""
        if self._kept is None or self._kept[0] != index:
            tick = time.perf_counter()
            self._kept = (index, self.families(secret, index))
            log.info(
                "tempo %s: %d families drawn in %.2fs", index, len(self._kept[1].tasks()), time.perf_counter() - tick
            )
        return self._kept[1]

    def kept_tasks(self) -> Sequence[Task]:
        """The families of the tempo kept now (none before the first draw)."""
        return () if self._kept is None else self._kept[1].tasks()
