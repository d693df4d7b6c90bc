"""How many code answers of one miner the validator judges per tempo.

Judging a ``code`` answer runs it in the sandbox (up to ``scoring.quality.code.JUDGING``:
3 s of CPU, about 18 s of wall time at worst). Verdicts are kept by (code, reference)
whatever they are, so an answer sent again costs nothing; what is left to bound is a miner
sending new answers. Each miner may have :data:`JUDGINGS_PER_TEMPO` answers judged per
tempo; an answer past it is not judged that tempo, and the miner's outcome for the step
is the failure :data:`NOT_JUDGED` (score 0, like any answer that could not be scored).
An answer several miners sent is judged once and charged to each of them with allowance
left; it is judged as long as one of them has some.

Judging also shares the step's deadline with execution (:class:`JudgingTime`): each
answer to judge reserves, as it starts, an equal share of the judging slots' time left
before the deadline, and its sandboxed runs are stopped at the end of that share; an
answer not judged by then is its miners' failure :data:`DEADLINE_NOT_JUDGED` (score 0,
no verdict kept, so it can be judged in a later step within the allowance). So a step's
judging costs at most its slots' time until the deadline, whatever its miners send.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

JUDGINGS_PER_TEMPO = 16
"""Code answers judged per miner per tempo (an honest miner sends one per code step)."""
NOT_JUDGED = "not judged: judging allowance for this tempo spent"
DEADLINE_NOT_JUDGED = "step deadline: answer not judged within its share of the time left"


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


class JudgingTime:
    """The judging slots' time until the step's deadline ``until`` (``time.monotonic()``),
    shared equally by the answers still to judge.

    The answers not yet started go through the slots in turns, ``slots`` at a time; the
    one starting now gets the time left divided by the turns they need,
    ``⌈answers not yet started ÷ slots⌉``, never past ``until``. However many answers
    there are and in whatever order they start, each gets at least an equal share of
    a slot's time, the last ones included, and time an answer leaves unused goes to
    those after it. Used from the event loop only.
    """

    def __init__(self, until: float, slots: int, answers: int) -> None:
        self.until = until
        self.slots = slots
        self._waiting = answers

    def start(self, now: float) -> float:
        """The time by which the answer starting ``now`` must be judged (its share's end)."""
        turns = max(1, -(-self._waiting // self.slots))
        self._waiting -= 1
        return now + max(0.0, self.until - now) / turns

    def skip(self) -> None:
        """One answer fewer to judge (its execution failed, or another's judgement serves it)."""
        self._waiting -= 1
