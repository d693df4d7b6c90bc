"""`dagnet bench world`: what a planner earns over the reference in the hidden world (issues 28, 35).

Over ``tempos`` tempos of the hidden world (:func:`subnets.world.world_for`) of each of
``secrets`` validator secrets (``first_secret``, the next, …: a world is one draw, so one
secret's ten tempos say as much about that draw as about the world's design), every
family (the curated ones and ``drawn`` families drawn from the grammar) runs on ``seeds``
hidden instances per tempo, ``final_seeds`` in the last tempo — seeds that are never
public examples — as a validator runs it (owned execution, simulated clock, the tempo's
world), planned by:

- ``reference``: the validator's, ``good`` on the forecast of the tempo's world from the
  worlds published before it (:func:`planners.public.reference_plan`);
- ``good``: static, from the advertised profile (the package's ``available_tools``);
  ``good+10``: its plan with 10 retries on every node;
- ``naive+retries``: the naive chain with one retry per node;
- ``public``: ``good`` on the last published world, 10 retries a node;
- ``oracle``: ``good`` given the world's truth as the profile (expected latency with its
  tail, true price, the failure probability as expected extra attempts), 10 retries a
  node: a planner that knows the world;
- ``learner``: a planner named ``learner`` (``load_planner("learner")`` or ``--learner
  module:attr``) that hears the :func:`engine.feedback.node_feedback` of its own runs of
  each family (``observe(StepFeedback)``) before the next is planned; "n/a" when none loads.

Per task type it prints each planner's mean S less the reference's; the mean S of each
(over the seeds of a tempo, then families, tempos and secrets), the headroom (oracle − good), good's weight over naive+retries' in a 2-miner
network (``normalize_weights``), and learner − good in the last tempo when there is a
learner; then the headroom and the weight ratio of each secret alone. Then what issue 28
asks of it, as medians over the families × secrets (a family in one secret's world is one
sample): the *headroom*, each sample's oracle − good over the tempos; the learner's
*gain in the last tempo*, each sample's learner − good over that tempo's seeds; the gain
as a share of the headroom.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from rich.console import Console

from engine.feedback import node_feedback
from engine.owned import evaluate_owned
from planners import GoodPlanner, PlanningError, PlanProposal, load_planner
from planners.loader import PlannerLoadError
from planners.naive import naive_with_retries
from planners.public import plan_in_world, reference_plan, with_retries
from protocol.canonical import plan_digest
from protocol.feedback import StepFeedback
from protocol.synapse import TaskPackage, ToolInfo
from protocol.validation import check_plan_for
from render.columns import ALWAYS, Column, fit_table
from scoring.margin import outcome_key
from subnets.forecast import forecast, with_forecast
from subnets.owned import owned_runner
from subnets.world import World, world_for
from tasks import Family
from validator.draws import mean_over

from .progress import Steps
from .tasks import network_weights
from .tiers import bench_families

__all__ = ["Played", "draw_order", "play", "render_world_bench", "run_world_bench", "static_plans"]

STATIC = ("good", "good+10", "naive+retries")
STRATEGIES = (*STATIC, "public", "reference", "oracle", "learner")
VALIDATOR = "bench"
"""The hotkey the bench's validator sends its forecasts and feedback under."""
LEARNER_TARGET = 0.03
"""What the learner must beat the reference by, in mean S, on every task type."""
HEADROOM_TARGET = 0.10
RECOVERY_TARGET = 0.5
RATIO_TARGET = 2.0
_PARTS = ("S", "S_success", "S_cost", "S_latency", "S_reliability", "output_quality", "completion_ratio")

Planner = Callable[[TaskPackage], PlanProposal]
Derive = Callable[[Mapping[str, "PlanProposal | None"]], "PlanProposal | None"]
"""A strategy whose plan is made from the other strategies' plans of the same family and tempo."""


def hidden_seeds(tempo: int, seeds: int, count: int | None = None) -> list[int]:
    """The instance seeds of ``tempo`` when each tempo plays ``seeds``: small whole numbers
    from 1 (seed 0 is the public example; the other public examples have the top bit of 64
    set: ``tasks.seed.public_seed``). ``count`` (more than ``seeds``) only in the last tempo."""
    return [1 + tempo * seeds + i for i in range(seeds if count is None else count)]


def tempo_families(families: Sequence[Family], secret: int, tempo: int, per_tempo: int | None) -> list[Family]:
    """The families ``secret``'s validator plays in ``tempo``: all of them (``per_tempo``
    ``None``), else ``per_tempo`` of them, a different draw each tempo (by a hash of the
    secret, the tempo and the family), in the families' order."""
    if per_tempo is None or per_tempo >= len(families):
        return list(families)
    ranked = sorted((f.task_id for f in families), key=lambda task_id: draw_order(secret, tempo, task_id))
    chosen = set(ranked[:per_tempo])
    return [f for f in families if f.task_id in chosen]


def draw_order(*parts: Any) -> str:
    """A key that orders things as a validator's draw would: sha256 of ``parts``."""
    return hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()


def advertised_tools(families: Sequence[Family]) -> dict[str, ToolInfo]:
    """Every subnet the families list, by id, as advertised (the first listing of each)."""
    tools: dict[str, ToolInfo] = {}
    for family in families:
        for name, info in family.package.available_tools.items():
            tools.setdefault(name, info)
    return tools


def oracle_package(package: TaskPackage, world: World) -> TaskPackage:
    """``package`` with the world's truth as its profile."""
    return package.model_copy(update={"available_tools": world.tools(package.available_tools)})


def oracle(package: TaskPackage, world: World) -> PlanProposal:
    """``good``'s plan for the world's truth (true prices, expected latencies and attempts),
    each node declaring the retries its subnet needs (:func:`planners.public.plan_in_world`)."""
    return plan_in_world(package, world)


def public_plan(package: TaskPackage, last: World | None) -> PlanProposal:
    """A planner on nothing but what is published: ``good`` on the last published world
    (``last``), 10 retries a node; plain ``good`` before any is published."""
    return plan_in_world(package, last) if last is not None else with_retries(GoodPlanner(timed=False).plan(package))


def _plan(planner: Planner, package: TaskPackage) -> PlanProposal | None:
    try:
        return planner(package)
    except PlanningError:
        return None


def _run(proposal: PlanProposal | None, family: Family, seed: int, world: World) -> tuple[dict[str, float], Any]:
    """S and its parts of ``proposal`` on the instance of ``seed`` in ``world``, and the execution."""
    if proposal is None:
        return dict.fromkeys(_PARTS, 0.0), None
    task = family.task(family.instance(seed))
    check = check_plan_for(proposal.plan, task)
    evaluation = evaluate_owned(
        proposal.plan, check, task, owned_runner(task, world=world), total_estimated_cost=proposal.total_estimated_cost
    )
    return {part: getattr(evaluation.score, part) for part in _PARTS}, evaluation.execution


class _Draws:
    """One family's plans over ``draws`` draws of ``world`` (:meth:`World.drawn`), each
    distinct program (canonical digest, declared cost) run once a seed."""

    def __init__(self, family: Family, world: World, draws: int) -> None:
        self.family, self.world, self.draws = family, world, draws
        self._kept: dict[tuple[Any, ...], float] = {}

    def mean(self, proposal: PlanProposal | None, seed: int, first: float) -> float:
        """``proposal``'s mean S on ``seed`` over the draws, draw 0's S being ``first``."""
        if proposal is None or self.draws <= 1:
            return first
        key = (plan_digest(proposal.plan), proposal.total_estimated_cost, seed)
        if key not in self._kept:
            others = [_run(proposal, self.family, seed, self.world.drawn(k))[0]["S"] for k in range(1, self.draws)]
            self._kept[key] = mean_over([first, *others])
        return self._kept[key]


def load_learner(name: str | None) -> Any | None:
    """The learner planner, or ``None`` when there is none to load."""
    try:
        return load_planner(name or "learner")
    except PlannerLoadError:
        return None


def _feedback(
    family: Family, proposal: PlanProposal, execution: Any, score: dict[str, float], tempo: int
) -> StepFeedback:
    nodes, omitted = node_feedback(proposal.plan, execution)
    return StepFeedback(
        validator_hotkey=VALIDATOR,
        miner_uid=0,
        block=0,
        tempo=tempo,
        task_id=family.task_id,
        hint_tier="full",
        outcome=execution.status,
        score=score,
        nodes=nodes,
        nodes_omitted=omitted,
    )


def run_world_bench(
    *,
    tempos: int = 10,
    seeds: int = 1,
    final_seeds: int = 5,
    drawn: int = 12,
    secrets: int = 3,
    first_secret: int = 0,
    learner: str | None = None,
    families: Sequence[Family] = (),
    steps: Steps | None = None,
) -> dict[str, Any]:
    """Every secret × tempo × family × hidden seed with each strategy; see the module.
    ``steps`` hears the static planning, then each family played."""
    steps = steps or Steps()
    families = list(families) or bench_families(drawn, 0)
    static = static_plans(families, steps)
    rows: list[dict[str, Any]] = []
    learned = False
    chosen = range(first_secret, first_secret + secrets)
    final_seeds = max(seeds, final_seeds)
    steps.phase(f"{secrets} world(s) × {tempos} tempos × {len(families)} families", secrets * tempos * len(families))
    for secret in chosen:
        student = load_learner(learner)  # a fresh learner per world
        learned = student is not None
        rows += _play(families, static, secret, tempos, (seeds, final_seeds), student, steps)
    return {
        "tempos": tempos,
        "seeds": seeds,
        "final_seeds": final_seeds,
        "drawn": drawn,
        "secrets": list(chosen),
        "learner": learned,
        "rows": rows,
        "summary": summarize(rows, tempos),
        "per_secret": {s: summarize([r for r in rows if r["secret"] == s], tempos) for s in chosen},
    }


@dataclass(frozen=True, slots=True)
class Played:
    """One family in one tempo of one secret's world: each strategy's plan (``None`` when
    it could not plan) and S on each hidden seed of the tempo, in :func:`hidden_seeds` order."""

    secret: int
    tempo: int
    family: Family
    plans: dict[str, PlanProposal | None]
    scores: dict[str, list[float]]
    outcomes: dict[str, list[str | None]] = field(default_factory=dict)
    """Each strategy's outcome key per seed (:func:`scoring.margin.outcome_key`; ``None``: no run)."""


def play(
    families: Sequence[Family],
    static: dict[str, dict[str, PlanProposal | None]],
    secret: int,
    tempos: int,
    seeds: int,
    student: Any | None,
    final_seeds: int | None = None,
    derived: Mapping[str, Derive] | None = None,
    draws: int = 1,
    per_tempo: int | None = None,
) -> Iterator[Played]:
    """``tempos`` tempos of ``secret``'s world, family by family, ``seeds`` hidden seeds a
    tempo (``final_seeds`` in the last). The reference and ``public`` plan on the worlds
    published before the tempo; the learner hears its own runs of a family before the next
    family is planned, as a miner hears each step's feedback within a tempo (so consume the
    whole iterator). ``derived`` adds strategies whose plan is made from the others' (a
    renamed copy, more retries), played alike. With ``draws`` > 1 each S is the mean over
    that many draws of the tempo's world, as a validator's margins are
    (:mod:`validator.draws`; copies run once); outcome keys and the learner's feedback are
    of draw 0, the step's own run. ``per_tempo`` plays that many of the families each tempo
    (:func:`tempo_families`; ``None``: all)."""
    tools = advertised_tools(families)
    published: dict[int, World] = {}
    for tempo in range(tempos):
        world = world_for(secret, tempo, tools)
        prior = forecast(published, tempo, tools)
        last = published.get(tempo - 1)
        for family in tempo_families(families, secret, tempo, per_tempo):
            plans = dict(static[family.task_id])
            plans["reference"] = _plan(partial(reference_plan, prior=prior), family.package)
            plans["public"] = _plan(partial(public_plan, last=last), family.package)
            plans["oracle"] = _plan(partial(oracle, world=world), family.package)
            if student is not None:  # sent as a validator sends it: with the forecast the reference plans on
                plans["learner"] = _plan(student.plan, with_forecast(family.package, prior, VALIDATOR))
            for name, derive in (derived or {}).items():
                plans[name] = derive(plans)
            scores: dict[str, list[float]] = {}
            outcomes: dict[str, list[str | None]] = {}
            heard: list[StepFeedback] = []
            chosen = hidden_seeds(tempo, seeds, final_seeds if tempo == tempos - 1 else None)
            again = _Draws(family, world, draws)
            for strategy, proposal in plans.items():
                runs = [_run(proposal, family, seed, world) for seed in chosen]
                scores[strategy] = [again.mean(proposal, seed, score["S"]) for seed, (score, _) in zip(chosen, runs)]
                outcomes[strategy] = [
                    None if ex is None else outcome_key(score["S"], ex.final_output) for score, ex in runs
                ]
                if strategy == "learner" and proposal is not None:
                    heard += [_feedback(family, proposal, ex, score, tempo) for score, ex in runs if ex is not None]
            yield Played(secret, tempo, family, plans, scores, outcomes)
            if student is not None and hasattr(student, "observe"):
                for message in heard:
                    student.observe(message)
        published[tempo] = world


def static_plans(families: Sequence[Family], steps: Steps | None = None) -> dict[str, dict[str, PlanProposal | None]]:
    """Each family's plans from the advertised profile: ``good``'s and ``naive+retries``'."""
    steps = steps or Steps()
    steps.phase(f"planning good and naive+retries for {len(families)} families", len(families))
    good = GoodPlanner(timed=False)
    plans = {}
    for f in steps.each(families):
        planned = _plan(good.plan, f.package)
        plans[f.task_id] = {
            "good": planned,
            "good+10": None if planned is None else with_retries(planned),
            "naive+retries": _plan(naive_with_retries, f.package),
        }
    return plans


def _play(
    families: Sequence[Family],
    static: dict[str, dict[str, PlanProposal | None]],
    secret: int,
    tempos: int,
    seeds: tuple[int, int],
    student: Any | None,
    steps: Steps,
) -> list[dict[str, Any]]:
    """The rows of ``tempos`` tempos of ``secret``'s world (``seeds``: each tempo's hidden
    seeds, and the last tempo's): each strategy's median S over the seeds, and its mean."""
    return [
        {
            "secret": p.secret,
            "tempo": p.tempo,
            "task_id": p.family.task_id,
            "task_type": p.family.task_type,
            **{strategy: statistics.median(scores) for strategy, scores in p.scores.items()},
            **{f"{strategy} mean": statistics.fmean(scores) for strategy, scores in p.scores.items()},
        }
        for p in steps.each(play(families, static, secret, tempos, seeds[0], student, seeds[1]))
    ]


def summarize(rows: list[dict[str, Any]], tempos: int) -> dict[str, Any]:
    """Per type and overall: each strategy's mean S, the headroom, good's weight over
    naive+retries', and learner − good in each tempo."""
    groups = {t: [r for r in rows if r["task_type"] == t] for t in sorted({r["task_type"] for r in rows})}
    groups["all"] = rows
    summary: dict[str, Any] = {}
    for name, typed in groups.items():
        present = [s for s in STRATEGIES if all(s in r for r in typed)]
        means = {s: statistics.fmean(r[f"{s} mean"] for r in typed) for s in present}
        weights = network_weights(means["good"], means["naive+retries"])["2_miners"]
        entry: dict[str, Any] = {
            "runs": len(typed),
            "mean_S": means,
            "headroom": means["oracle"] - means["good"],
            "weight_ratio": weights["good"] / weights["other"] if weights["other"] > 0 else float("inf"),
            "over_reference": {s: means[s] - means["reference"] for s in present if s != "reference"},
        }
        if "learner" in present:
            entry["learned"] = [
                statistics.fmean(r["learner mean"] - r["good mean"] for r in typed if r["tempo"] == t)
                for t in range(tempos)
            ]
            entry["learner_over_reference"] = [
                statistics.fmean(r["learner mean"] - r["reference mean"] for r in typed if r["tempo"] == t)
                for t in range(tempos)
            ]
            entry["learner_ok"] = entry["over_reference"]["learner"] >= LEARNER_TARGET
        entry |= medians(typed, tempos)
        entry["headroom_ok"] = entry["median_headroom"] >= HEADROOM_TARGET
        entry["ratio_ok"] = entry["weight_ratio"] >= RATIO_TARGET
        if "final_gain" in entry:
            entry["recovered_ok"] = entry["recovered"] >= RECOVERY_TARGET
        summary[name] = entry
    return summary


def medians(rows: list[dict[str, Any]], tempos: int) -> dict[str, float]:
    """Issue 28's figures over ``rows``, each a median over the samples (a family in one
    secret's world): ``median_headroom``, a sample's oracle − good over every tempo; with a
    learner, ``final_gain``, its learner − good over the last tempo's seeds, and
    ``recovered``, that gain over the headroom."""
    samples: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for row in rows:
        samples.setdefault((row["secret"], row["task_id"]), []).append(row)
    headroom = statistics.median(
        statistics.fmean(r["oracle"] - r["good"] for r in sample) for sample in samples.values()
    )
    found: dict[str, float] = {"median_headroom": headroom}
    finals = [r for r in rows if r["tempo"] == tempos - 1]
    if finals and all("learner" in r for r in finals):
        gain = statistics.median(r["learner mean"] - r["good mean"] for r in finals)
        found |= {"final_gain": gain, "recovered": gain / headroom if headroom > 0 else float("nan")}
    return found


def _mean(strategy: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda r: f"{r['mean_S'][strategy]:.3f}" if strategy in r["mean_S"] else "n/a"


_AGAINST = ("good", "good+10", "public", "oracle", "learner")


def _over(planner: str) -> Column:
    return Column(
        f"{planner}\n− ref",
        lambda r: f"{r['over_reference'][planner]:+.3f}" if planner in r["over_reference"] else "n/a",
        ALWAYS if planner == "learner" else 2,
    )


REFERENCE_COLUMNS = (
    Column("type", lambda r: r["type"], ALWAYS, justify="left"),
    Column("refer-\nence", lambda r: f"{r['mean_S']['reference']:.3f}", ALWAYS),
    *(_over(planner) for planner in _AGAINST),
    Column(
        "learner − ref,\nlast tempo",
        lambda r: f"{r['learner_over_reference'][-1]:+.3f}" if "learner_over_reference" in r else "n/a",
        1,
    ),
)
"""Mean S of each planner less the reference's (the validator's, on the published past):
what a miner is paid for, per type."""


def _secret_cell(one: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], str]:
    """A row's headroom and weight ratio under one secret (``one``: that secret's summary by type)."""
    return lambda r: f"{one[r['type']]['headroom']:+.3f}, {one[r['type']]['weight_ratio']:.2f}"


MAIN_COLUMNS = (
    Column("type", lambda r: r["type"], ALWAYS, justify="left"),
    Column("runs", lambda r: str(r["runs"]), 1),
    Column("good", _mean("good"), ALWAYS),
    Column("naive\n+retries", _mean("naive+retries"), 3),
    Column("oracle", _mean("oracle"), 4),
    Column("learner", _mean("learner"), 2),
    Column("oracle\n− good", lambda r: f"{r['headroom']:+.3f}", ALWAYS),
    Column("good ÷\nnaive+r\nweight", lambda r: f"{r['weight_ratio']:.2f}", ALWAYS),
    Column("learner\n− good,\nlast tempo", lambda r: f"{r['learned'][-1]:+.3f}" if "learned" in r else "n/a", ALWAYS),
)
"""The mean-S table by importance: what the targets read is never dropped; at 80 columns the
runs and the learner's mean S go first (learner − good keeps what it says)."""
ISSUE_COLUMNS = (
    Column("type", lambda r: r["type"], ALWAYS, justify="left"),
    Column("oracle\n− good", lambda r: f"{r['median_headroom']:+.3f}", ALWAYS),
    Column("learner − good,\nlast tempo", lambda r: f"{r['final_gain']:+.3f}" if "final_gain" in r else "n/a", ALWAYS),
    Column("share of\nthe headroom", lambda r: f"{r['recovered']:.0%}" if "recovered" in r else "n/a", ALWAYS),
    Column("good ÷\nnaive+r weight", lambda r: f"{r['weight_ratio']:.2f}", ALWAYS),
)


def render_world_bench(result: dict[str, Any], console: Console) -> None:
    """The three tables, each fitted to ``console.width`` (columns dropped, never a figure
    cut), then one line: which types meet the targets and which miss which."""
    secrets = result["secrets"]
    rows = [{"type": name, **entry} for name, entry in result["summary"].items()]
    console.print(
        fit_table(
            REFERENCE_COLUMNS,
            rows,
            console.width,
            title=(
                f"hidden world, secrets {secrets[0]}–{secrets[-1]} × {result['tempos']} tempos: mean S over the reference "
                "(good on the forecast from the published worlds)"
            ),
        )
    )
    console.print(
        fit_table(
            MAIN_COLUMNS,
            rows,
            console.width,
            title=(
                f"hidden world, secrets {secrets[0]}–{secrets[-1]} × {result['tempos']} tempos × {result['seeds']} "
                f"hidden seed(s) per family (curated + {result['drawn']} drawn): mean S"
            ),
        )
    )
    alone = (
        Column("type", lambda r: r["type"], ALWAYS, justify="left"),
        *(
            Column(f"secret {secret}", _secret_cell(one), len(secrets) - k)
            for k, (secret, one) in enumerate(result["per_secret"].items())
        ),
    )
    console.print(
        fit_table(alone, rows, console.width, title="each secret alone: oracle − good, good ÷ naive+r weight")
    )
    console.print(
        fit_table(
            ISSUE_COLUMNS,
            rows,
            console.width,
            title=(
                f"medians over families × secrets: headroom over {result['tempos']} tempos, the learner's gain in the last "
                f"({result['final_seeds']} hidden seeds a family)"
            ),
        )
    )
    verdict = targets_verdict(result)
    console.print(
        f"targets: learner − reference ≥ {LEARNER_TARGET} mean S, median oracle − good ≥ {HEADROOM_TARGET}, "
        f"the learner's last-tempo gain ≥ {RECOVERY_TARGET:.0%} of it, good ÷ naive+r ≥ {RATIO_TARGET}",
        highlight=False,
    )
    for name, misses in verdict.items():
        if misses:
            console.print(f"missed on {name}: {'; '.join(misses)}", highlight=False, soft_wrap=True)
    console.print(targets_line(verdict), highlight=False, soft_wrap=True)


def targets_verdict(result: dict[str, Any]) -> dict[str, list[str]]:
    """Per task type (and ``all``), each of issue 28's targets it misses, with its figure."""
    verdict = {}
    for name, entry in result["summary"].items():
        verdict[name] = [
            *(
                [f"learner − reference {entry['over_reference']['learner']:+.3f} < {LEARNER_TARGET}"]
                if not entry.get("learner_ok", True)
                else []
            ),
            *(
                [f"oracle − good {entry['median_headroom']:+.3f} < {HEADROOM_TARGET}"]
                if not entry["headroom_ok"]
                else []
            ),
            *(
                [f"the learner's gain {entry['recovered']:.0%} of it < {RECOVERY_TARGET:.0%}"]
                if not entry.get("recovered_ok", True)
                else []
            ),
            *([f"good ÷ naive+r {entry['weight_ratio']:.2f} < {RATIO_TARGET}"] if not entry["ratio_ok"] else []),
        ]
    return verdict


def targets_line(verdict: dict[str, list[str]]) -> str:
    """The bench's last line: the types on which every target holds, and those that miss one."""
    held = [name for name, misses in verdict.items() if not misses]
    missed = [name for name, misses in verdict.items() if misses]
    return f"targets hold on {', '.join(held) or 'no type'}" + (f"; missed on {', '.join(missed)}" if missed else "")
