"""How many code answers of one miner the validator judges per tempo.

Judging a ``code`` answer runs it in the sandbox (up to ``scoring.quality.code.JUDGING``:
3 s of CPU, about 18 s of wall time at worst). Verdicts are kept by (code, reference)
whatever they are, so an answer sent again costs nothing; what is left to bound is a miner
sending new answers. Each miner may have :data:`JUDGINGS_PER_TEMPO` answers judged per
tempo; an answer past it is not judged that tempo, and the miner's outcome for the step
is the failure :data:`NOT_JUDGED` (score 0, like any answer that could not be scored).
An answer several miners sent is judged once and charged to each of them with allowance
left; it is judged as long as one of them has some.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

JUDGINGS_PER_TEMPO = 16
"""Code answers judged per miner per tempo (an honest miner sends one per code step)."""
NOT_JUDGED = "not judged: judging allowance for this tempo spent"


class JudgingAllowance:
    """Judgements charged per miner in the current period (a tempo; a step where the
    tempo is not read). Used from the event loop only."""

    def __init__(self, per_miner: int = JUDGINGS_PER_TEMPO) -> None:
        self.per_miner = per_miner
        self._period: int | None = None
        self._used: Counter[int] = Counter()

    def for_period(self, period: int) -> JudgingAllowance:
        """This allowance, every miner's count restarted when ``period`` is a new one."""
        if period != self._period:
            self._period = period
            self._used.clear()
        return self

    def take(self, uids: Iterable[int]) -> bool:
        """Charge one judgement to each of ``uids`` that has allowance left; False when none has."""
        left = [uid for uid in uids if self._used[uid] < self.per_miner]
        self._used.update(left)
        return bool(left)
