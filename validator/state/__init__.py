"""What a validator remembers between steps and across restarts, in one SQLite file.

- **windows**: the last 100 scores of each miner uid (a :class:`RollingWindow`)
  with the hotkey they belong to and how many tasks that hotkey has been scored on,
  and beside them the last 100 credited margins over the reference and shares of an
  answer (:mod:`scoring.margin`), of the steps whose reference produced a score;
- **executions**: one record per scored miner per step — the task as sent and the
  draw it came from (base task, instance seed, synthetic or not, hint tier, the tempo
  of a drawn family), the plan and its hash, the metrics, the final output, the score and the
  reason for a 0 — enough to re-score it later (:mod:`validator.audit`) — and the
  reference's score on the step, the margin over it, the credited margin and share, and
  the plan's canonical digest;
- **steps**: the blocks whose step is settled;
- **tasks**: each task's lifecycle: active, or set aside since a block until a
  block for a reason, and how many steps in a row its reference plan failed;
- **meta**: the last block weights were set at, how many step rows retention has
  deleted (and a legacy 63-bit secret, :mod:`validator.state.secret`);
- **secret**: the 128-bit instance secret and the block it takes effect at;
- **payout**: where the last accepted weights sent the emission (:class:`~scoring.margin.Payout`);
- **answers** and **first_seen** (:mod:`validator.answers`): each miner's window of
  answers step by step and when each hotkey was first seen sending each answer, which
  tell copies from the originals they copy.

What a miner shapes is kept up to a size (:class:`Records`): a plan, a final output
or a score larger than :data:`ANSWER_CAP_BYTES` as canonical JSON is stored as its
sha256, its size and its first :data:`CAPPED_PREFIX_BYTES` (:class:`Capped`), and
records and step rows older than :data:`RETENTION_BLOCKS` are deleted as each step
settles, their pages reused. So the file grows by at most
:func:`step_growth_bound` per step whatever miners send.

The file is made whole or not at all (:func:`~validator.state.store._create`): a new path gets its schema
and its instance secret before it appears. An existing file that is empty, has
lost its secret or has a weak one is refused (:class:`StateRefused`) unless opened
with ``reset``, which makes a new secret in it; so is one that cannot be read or is of
a newer schema (:mod:`validator.state.schema`: numbered migrations under
``PRAGMA user_version``).

A write the disk refuses (full, I/O error, read-only) raises :class:`StateUnwritable`,
an infrastructure failure: the step is skipped, nothing of it stored, and
:attr:`ValidatorState.write_problem` names the cause for ``/health`` until a write
succeeds. Weights the chain accepted while the disk refused are kept in memory and
written with the next write that succeeds (:meth:`ValidatorState.weights_accepted`
never raises for the disk).

A step settles in one transaction (:meth:`ValidatorState.settle_step`): its
records, window updates, step row and what its reference run said about the
task commit together or not at all, so a process killed at any moment leaves
either the whole step or none of it. The
file opens through :func:`storage.open_shared`, so a second process (an audit,
a dashboard) can read it while the validator writes.

The package is a facade and its rooms: :mod:`~validator.state.store` (the connection,
its transactions, :class:`ValidatorState`), :mod:`~validator.state.schema`,
:mod:`~validator.state.records`, :mod:`~validator.state.windows`,
:mod:`~validator.state.lifecycle`, :mod:`~validator.state.payout` and
:mod:`~validator.state.secret`.
"""

from .lifecycle import (
    ACTIVE,
    COOL_OFF_TEMPOS,
    LIFECYCLE_STATES,
    SET_ASIDE,
    SET_ASIDE_AFTER,
    Lifecycle,
    ReferenceRun,
    TaskLifecycle,
)
from .payout import PaidOut
from .records import (
    ANSWER_CAP_BYTES,
    CAPPED_PREFIX_BYTES,
    PRUNE_BATCH,
    RECORD_BOUND_BYTES,
    RETENTION_BLOCKS,
    STEP_BOUND_BYTES,
    Capped,
    ExecutionRecord,
    Records,
    canonical_json,
    plan_hash,
    step_growth_bound,
)
from .schema import MIGRATIONS, Schema
from .store import WAL_LIMIT_BYTES, StateRefused, StateUnwritable, ValidatorState
from .windows import WINDOW_SIZE, Standing

__all__ = [
    "ACTIVE",
    "ANSWER_CAP_BYTES",
    "CAPPED_PREFIX_BYTES",
    "COOL_OFF_TEMPOS",
    "LIFECYCLE_STATES",
    "MIGRATIONS",
    "PRUNE_BATCH",
    "RECORD_BOUND_BYTES",
    "RETENTION_BLOCKS",
    "SET_ASIDE",
    "SET_ASIDE_AFTER",
    "STEP_BOUND_BYTES",
    "WAL_LIMIT_BYTES",
    "WINDOW_SIZE",
    "Capped",
    "ExecutionRecord",
    "Lifecycle",
    "PaidOut",
    "Records",
    "ReferenceRun",
    "Schema",
    "Standing",
    "StateRefused",
    "StateUnwritable",
    "TaskLifecycle",
    "ValidatorState",
    "canonical_json",
    "plan_hash",
    "step_growth_bound",
]
