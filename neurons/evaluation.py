"""`dagnet eval` as a function: a planner scored offline exactly as a validator scores it,
on what a validator sends, beside the reference planners.

The families are the curated ones and, as a validator offers them, those drawn for a
secret and tempos (``gen_…``, :func:`tasks.drawn_families` with the validator's executing
check). For every family and seed the planner answers the package of the instance the
family's generator draws for the seed (the validator's instance draw), sent as a
validator's step sends it (:class:`validator.sampling.TaskDraw`): at a hint tier drawn
as the validator draws it (:func:`validator.sampling.step_tier`, the secret and the seed
standing in for the block, so at :data:`~validator.sampling.DEFAULT_TIER_SHARES`), or
at one tier when asked; as its synthetic variant when
:func:`validator.sampling.is_synthetic` says so (at
:data:`~validator.sampling.SYNTHETIC_RATE`); under the miner's planning deadline (:func:`planners.run_planner`); the answer goes through
the validator's response check (:func:`protocol.response.check_response`) and a valid
plan through owned execution and the scorer (:func:`engine.owned.evaluate_owned`,
what ``dagnet run PLAN --task FAMILY --seed N`` runs). A planner that fails, or an
answer the validator would reject, scores 0 with the reason, node by node where the
plan check names nodes. Nothing one family does stops the others. Every run is
labelled with its tier and its kind (``curated``, ``drawn`` or ``synthetic``), and the
result is summed up per type, per tier, per kind and over all.

Wiring only: planning, checking, execution and scoring are the validator's and the
miner's own functions.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.owned import evaluate_owned
from neurons.localrun import family_task
from planners import PLANNER_TIMEOUT_S, Planner, PlannerFailure, answer_for, load_planner, run_planner
from protocol.canonical import plan_digest
from protocol.hints import HintTier
from protocol.outcomes import RunStatus
from protocol.response import check_response
from protocol.task import Task
from scoring.margin import Answer, Means, network_pay, outcome_key
from subnets.forecast import Forecast, with_forecast
from subnets.owned import owned_runner
from subnets.world import ADVERTISED, World, world_for, world_named
from tasks import Family, load_families
from tasks.drawn import PREFIX as DRAWN_PREFIX
from validator.margins import Forecasts
from validator.sampling import DEFAULT_TIER_SHARES, SYNTHETIC_RATE, TaskDraw, is_synthetic, step_tier

__all__ = ["PARTS", "REFERENCES", "Mix", "Run", "evaluate_planner", "score_answer", "select_families"]

REFERENCES = ("good", "naive")
"""The planners every evaluation is shown beside."""
EVAL_VALIDATOR = "eval"
"""The hotkey ``dagnet eval`` sends its forecasts under, as a validator sends its own."""
_FORECASTS = Forecasts(world_for)
"""The forecasts ``--world`` sends, kept while one tempo is evaluated, as a validator keeps them."""
PARTS = ("S", "S_success", "S_cost", "S_latency", "S_reliability", "output_quality", "completion_ratio")
"""What each run reports of its score (docs/scoring.md)."""

Progress = Callable[[int, int, str], None]
"""``(done, total, what is running now)``."""


@dataclass(frozen=True, slots=True)
class Mix:
    """How the instances are sent: ``tier`` (``None``: drawn per instance as a validator
    draws it, at ``tier_shares``), the ``synthetic_rate``, and the ``secret`` the tier
    draws read (the validator's instance secret)."""

    tier: HintTier | None = None
    tier_shares: Mapping[HintTier, float] = field(default_factory=lambda: dict(DEFAULT_TIER_SHARES))
    synthetic_rate: float = SYNTHETIC_RATE
    secret: int = 1
    world: str = "advertised"
    """The world the subnets play: ``advertised``, or a tempo whose hidden world is drawn
    from ``secret`` (:func:`subnets.world.world_named`)."""

    def draw(self, family: Family, seed: int, drawn_tempo: int | None) -> TaskDraw:
        """Instance ``seed`` of ``family`` as a validator's step sends it; the seed stands in
        for the block (a validator's tier and synthetic draws are per block)."""
        drawn = {} if drawn_tempo is None else {family.task_id: drawn_tempo}
        tier = self.tier or step_tier(self.secret, seed, family.task_id, drawn, self.tier_shares)
        synthetic = is_synthetic(f"dagnet eval:{self.secret}:{family.task_id}", seed, self.synthetic_rate)
        return TaskDraw(_instance(family, seed, drawn_tempo), seed, synthetic, tier, drawn_tempo)


@dataclass
class Run:
    """One planner on one instance: its score's parts, or why it scored 0."""

    planner: str
    task_id: str
    task_type: str
    seed: int
    tier: HintTier = "full"
    kind: str = "curated"
    """``curated``, ``drawn`` (a drawn family's instance) or ``synthetic`` (either, sent as its synthetic variant)."""
    score: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PARTS, 0.0))
    status: str = RunStatus.INVALID
    reason: str | None = None
    findings: list[str] = field(default_factory=list)
    """What the plan check found fatal, one finding each (``node x: ...``, a cycle...)."""
    nodes: dict[str, str] = field(default_factory=dict)
    """Node id → why the check blocks it or why it did not succeed when executed."""
    error: str | None = None
    """Set when the evaluation itself failed (a family that cannot be drawn, an engine error)."""
    digest: str | None = None
    """The plan's canonical digest (:func:`protocol.canonical.plan_digest`), when it passed the checks."""
    outcome: str | None = None
    """What its execution did (:func:`scoring.margin.outcome_key`), when it ran."""


def select_families(
    ids: Sequence[str] = (), task_type: str | None = None, drawn: Sequence[Family] = ()
) -> list[Family]:
    """The shipped families and ``drawn`` ones, restricted to ``ids`` (in that order) and
    ``task_type``. ``KeyError`` names an unknown id or a type no family has."""
    families = [*load_families(), *drawn]
    if ids:
        by_id = {f.task_id: f for f in families}
        unknown = [i for i in ids if i not in by_id]
        if unknown:
            raise KeyError(f"unknown task family {unknown[0]!r}; known: {', '.join(by_id)}")
        families = [by_id[i] for i in dict.fromkeys(ids)]
    if task_type is not None:
        types = sorted({f.task_type for f in load_families()})
        if task_type not in types:
            raise KeyError(f"unknown task type {task_type!r}; known: {', '.join(types)}")
        families = [f for f in families if f.task_type == task_type]
    if not families:
        raise KeyError("no family matches --family and --type together")
    return families


def score_answer(
    planner: Planner,
    task: Task,
    *,
    timeout_s: float = PLANNER_TIMEOUT_S,
    world: World = ADVERTISED,
    prior: Forecast | None = None,
) -> Run:
    """``planner``'s answer to ``task``'s package, checked and scored as a validator does,
    its subnets playing ``world``; the package carries ``prior``, the forecast of that
    world a validator sends (``None``: none, as with the advertised profile)."""
    package = with_forecast(task.package(), prior, EVAL_VALIDATOR)
    run = Run(getattr(planner, "name", "?"), task.task_id, task.task_type, task.seed or 0)
    try:
        result = asyncio.run(run_planner(planner, package, timeout_s=timeout_s))
        answer = answer_for(result, package, miner_uid=0)
    except PlannerFailure as failure:
        run.reason = f"planner {failure.kind}: {failure.reason}"
        return run
    checked = check_response(answer.model_dump_json(by_alias=True, exclude_none=True).encode(), package)
    if not checked.ok or checked.synapse is None or checked.synapse.workflow_plan is None or checked.plan_check is None:
        run.reason = checked.reason or "invalid response"
        if checked.plan_check is not None:
            run.findings = list(checked.plan_check.errors)
            run.nodes = dict(checked.plan_check.node_errors)
        return run
    evaluation = evaluate_owned(
        checked.synapse.workflow_plan,
        checked.plan_check,
        task,
        owned_runner(task, world=world),
        total_estimated_cost=checked.synapse.total_estimated_cost,
    )
    score = evaluation.score
    run.score = {part: getattr(score, part) for part in PARTS}
    run.digest = plan_digest(checked.synapse.workflow_plan)
    run.outcome = outcome_key(score.S, evaluation.execution.final_output)
    run.status = evaluation.execution.status
    run.reason = score.details.get("S_reason") or score.details.get("reason")
    run.nodes = {
        node_id: record.reason or record.status
        for node_id, record in evaluation.execution.nodes.items()
        if record.status != "success"
    }
    return run


def evaluate_planner(
    name: str,
    *,
    options: Mapping[str, Any] | None = None,
    families: Sequence[Family],
    seeds: Iterable[int],
    timeout_s: float = PLANNER_TIMEOUT_S,
    progress: Progress | None = None,
    mix: Mix = Mix(),
    drawn: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """Score planner ``name`` (loaded with ``options``) and the references on ``families``
    × ``seeds``, every instance sent as ``mix`` says; ``drawn`` maps the ids of the drawn
    families among ``families`` to the tempo they were drawn for. The result
    :func:`neurons.commands.eval` prints (``--json`` prints it as is).

    ``PlannerLoadError`` when ``name`` cannot be loaded, ``ValueError`` for a world
    (``mix.world``) that names none; nothing else raises.
    """
    world_named(mix.world, mix.secret, {})  # a bad name fails before anything runs
    planners = {name: load_planner(name, options)}
    for reference in REFERENCES:
        planners.setdefault(reference, load_planner(reference))
    seeds, drawn = list(seeds), dict(drawn or {})
    total, done = len(families) * len(seeds) * len(planners), 0
    rows = []
    for family in families:
        runs: dict[str, list[Run]] = {label: [] for label in planners}
        for seed in seeds:
            for label, planner in planners.items():
                if progress is not None:
                    progress(done, total, f"{family.task_id} seed {seed} {label}")
                runs[label].append(_guarded(label, planner, family, seed, timeout_s, mix, drawn.get(family.task_id)))
                done += 1
        rows.append(_family_row(family, name, runs))
    if progress is not None:
        progress(total, total, "")
    return {
        "planner": name,
        "references": list(REFERENCES),
        "seeds": seeds,
        "tier": mix.tier or "mix",
        "tier_shares": dict(mix.tier_shares),
        "synthetic_rate": mix.synthetic_rate,
        "secret": mix.secret,
        "drawn": drawn,
        "timeout_s": timeout_s,
        "families": rows,
        "types": _grouped(rows, name, lambda row, run: row["task_type"], families=True),
        "tiers": _grouped(rows, name, lambda row, run: run["tier"]),
        "kinds": _grouped(rows, name, lambda row, run: run["kind"]),
    }


def _instance(family: Family, seed: int, drawn_tempo: int | None) -> Task:
    """The instance of ``family`` for ``seed`` (a curated family by its id, as ``dagnet run --task`` draws it)."""
    if drawn_tempo is None and not family.task_id.startswith(DRAWN_PREFIX):
        return family_task(family.task_id, seed)
    return family.task(family.instance(seed))


def _guarded(
    label: str, planner: Planner, family: Family, seed: int, timeout_s: float, mix: Mix, drawn_tempo: int | None
) -> Run:
    """:func:`score_answer` on the instance ``mix`` sends, with anything that breaks the
    evaluation kept in the run."""
    try:
        draw = mix.draw(family, seed, drawn_tempo)
        task = draw.task(lambda instance, _seed: instance)
        played = world_named(mix.world, mix.secret, task.available_tools)
        prior = _FORECASTS(mix.secret, played, task.available_tools)
        run = score_answer(planner, task, timeout_s=timeout_s, world=played, prior=prior)
        run.task_id, run.tier = family.task_id, draw.tier
        run.kind = "synthetic" if draw.synthetic else "curated" if drawn_tempo is None else "drawn"
    except Exception as exc:  # one family's failure is one row's error, never the run's end
        run = Run(label, family.task_id, family.task_type, seed, error=f"{type(exc).__name__}: {exc}")
        run.reason = run.error
    run.planner = label
    return run


def _family_row(family: Family, name: str, runs: Mapping[str, list[Run]]) -> dict[str, Any]:
    labels = [name, *REFERENCES]
    errors = sorted({r.error for label in labels for r in runs[label] if r.error})
    return {
        "task_id": family.task_id,
        "task_type": family.task_type,
        "mean": {label: _mean(runs[label]) for label in labels},
        "wins": _wins(runs[name], runs["good"]),
        "error": "; ".join(errors) or None,
        "runs": {label: [asdict(r) for r in runs[label]] for label in labels},
    }


def _grouped(
    rows: list[dict[str, Any]],
    name: str,
    key: Callable[[dict[str, Any], dict[str, Any]], str],
    *,
    families: bool = False,
) -> dict[str, dict[str, Any]]:
    """Per ``key`` of a run (its type, tier or kind) and over all: the instances, mean
    parts, wins against good and weight shares; with ``families``, how many families."""
    labels = [name, *REFERENCES]
    keys: dict[str, list[tuple[dict[str, Any], int]]] = {}
    for row in rows:
        for index, run in enumerate(row["runs"][name]):
            keys.setdefault(key(row, run), []).append((row, index))
    groups = {group: keys[group] for group in sorted(keys)}
    groups["all"] = [(row, index) for row in rows for index in range(len(row["runs"][name]))]
    summary = {}
    for group, members in groups.items():
        runs = {label: [Run(**row["runs"][label][index]) for row, index in members] for label in labels}
        means = {label: _mean(runs[label]) for label in labels}
        paid = paid_shares(name, runs)
        summary[group] = {
            "instances": len(members),
            "mean": means,
            "wins": _wins(runs[name], runs["good"]),
            "weights": paid.weights,
            "margin": paid.margin,
            **({"families": len({row["task_id"] for row, _ in members})} if families else {}),
        }
    return summary


@dataclass(frozen=True, slots=True)
class NetworkPay:
    weights: dict[str, float]
    """The share of the weights each of the planner, ``good`` and ``naive`` earns."""
    margin: dict[str, float]
    """The planner's mean margin over ``good`` (``mean``): paid for when clear of ``K_SE`` standard errors."""


def paid_shares(name: str, runs: Mapping[str, Sequence[Run]]) -> NetworkPay:
    """What a validator pays a network of one miner each of ``name``, ``good`` and
    ``naive`` on these runs (:mod:`scoring.margin`): ``good`` is the validator's
    reference, so each instance's margins are taken over good's S there; the planner is
    first committed, then ``good``, then ``naive``, so a planner that sends ``good``'s
    plan (or one that runs the same) is the group that holds it; the window is all the
    runs, each a unit of the error (eval plays one world or none: validators count errors
    in worlds, :mod:`scoring.worlds`). No owner's uid is on such a network: when nobody
    beats the reference the floor takes it all."""
    labels = [name, *REFERENCES]
    pay = network_pay(
        (index, {uid: _answer(runs[label][index]) for uid, label in enumerate(labels)}, reference.score["S"])
        for index, reference in enumerate(runs["good"])
    )
    weights = pay.paid.weights
    mine = pay.means.get(0, Means(0.0, 0.0))
    return NetworkPay(
        {"planner" if uid == 0 else label: weights.get(uid, 0.0) for uid, label in enumerate(labels)},
        {"mean": mine.margin},
    )


def _answer(run: Run) -> Answer:
    return Answer(run.digest, run.score["S"], run.outcome)


def _mean(runs: Sequence[Run]) -> dict[str, float]:
    if not runs:
        return dict.fromkeys(PARTS, 0.0)
    return {part: math.fsum(r.score[part] for r in runs) / len(runs) for part in PARTS}


def _wins(mine: Sequence[Run], good: Sequence[Run]) -> dict[str, int]:
    """On how many instances ``mine`` scored above, equal to and below ``good``."""
    pairs = list(zip(mine, good))
    return {
        "above": sum(a.score["S"] > b.score["S"] for a, b in pairs),
        "equal": sum(a.score["S"] == b.score["S"] for a, b in pairs),
        "below": sum(a.score["S"] < b.score["S"] for a, b in pairs),
        "of": len(pairs),
    }
