"""`dagnet eval`: a planner scored exactly as `dagnet run --task FAMILY --seed N` and the
validator's owned execution score it, beside good and naive; failures stay in their row."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import neurons.evaluation as evaluation
from engine.owned import evaluate_owned
from neurons.commands.eval import render
from neurons.evaluation import PARTS, Mix, Run, evaluate_planner, paid_shares, select_families
from neurons.localrun import family_task
from planners import load_planner
from protocol.canonical import plan_digest
from protocol.hints import TIERS
from protocol.response import check_response
from protocol.task import SYNTHETIC_PREFIX
from scoring.margin import FLOOR
from subnets.owned import owned_runner
from support.scale import cases
from validator.sampling import step_tier

ROOT = Path(__file__).resolve().parents[2]
DAGNET = [sys.executable, "-m", "neurons"]
CASES = [("rag_towns", 1), ("dt_sales", 4), ("agent_trip", 2), ("code_tax", 1)]
"""A family of every type, on hidden instances (seed 0 is the public example)."""

PLANNERS = '''
from planners import GoodPlanner
from protocol.plan import PlanNode, WorkflowPlan

class FailsOnRag:
    """good's plans, except that it raises on every rag task."""
    name = "fails-on-rag"

    def plan(self, package):
        if package.task_type == "rag":
            raise RuntimeError("no idea about rag")
        return GoodPlanner().plan(package)

class WrongField:
    """One search whose hit is read by a field hits do not have."""
    name = "wrong-field"

    def plan(self, package):
        kinds = {info.type: subnet for subnet, info in package.available_tools.items()}
        search = PlanNode(id="hits", subnet=kinds["retrieval"], action="search", params={"query": "x"})
        reply = PlanNode(id="reply", subnet=kinds["text"], action="text_transform",
                         params={"op": "strip", "text": "${hits.output.artifacts.metadata.hits.0.text}"})
        return WorkflowPlan(nodes=[search, reply], edges=[{"from": "hits", "to": "reply"}])

SEEN = []

class Records:
    """Refuses every package, keeping what it was sent (task id, tier, budget)."""
    name = "records"

    def __init__(self, refuse="no"):
        self.refuse = refuse

    def plan(self, package):
        from planners import PlanningError
        SEEN.append((package.task_id, package.hint_tier, package.constraints.max_latency_seconds))
        raise PlanningError(f"refused: {self.refuse}")

FORECASTS = []

class Told:
    """Plans on nothing but the forecast the package carries (the validator's reference's
    plan), keeping the forecast's tempo and validator."""
    name = "told"

    def plan(self, package):
        from planners.public import plan_in_world
        from subnets.forecast import forecast_world
        FORECASTS.append(None if package.forecast is None else (package.forecast.tempo, package.forecast.validator))
        return plan_in_world(package, forecast_world(package.forecast))

class Teleports(WrongField):
    """The same plan with one node on an action no subnet offers: the validator rejects it."""
    name = "teleports"

    def plan(self, package):
        plan = super().plan(package)
        return plan.model_copy(update={"nodes": [plan.nodes[0], plan.nodes[1].model_copy(update={"action": "teleport"})]})
'''


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "evalplanners.py").write_text(PLANNERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "evalplanners", raising=False)
    return tmp_path


def _good_run(family: str, seed: int) -> dict:
    result = evaluate_planner(
        "good", families=select_families([family]), seeds=[seed], mix=Mix(tier="full", synthetic_rate=0.0)
    )
    (run,) = result["families"][0]["runs"]["good"]
    return run


@pytest.mark.parametrize(("family", "seed"), cases(CASES))
def test_eval_good_is_exactly_dagnet_run_and_evaluate_owned(family: str, seed: int, tmp_path: Path) -> None:
    task = family_task(family, seed)
    answer = load_planner("good").plan(task.package()).answer(task.package(), miner_uid=0)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(answer.model_dump_json(by_alias=True, exclude_none=True))
    ran = subprocess.run(
        [*DAGNET, "run", str(plan_file), "--task", family, "--seed", str(seed), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode in (0, 1), ran.stderr
    by_cli = json.loads(ran.stdout)["score"]

    checked = check_response(plan_file.read_bytes(), task.package())
    direct = evaluate_owned(
        checked.synapse.workflow_plan,
        checked.plan_check,
        task,
        owned_runner(task),
        total_estimated_cost=checked.synapse.total_estimated_cost,
    ).score

    run = _good_run(family, seed)
    assert by_cli["S"] > 0.5, by_cli
    assert run["score"] == {part: by_cli[part] for part in PARTS} == {part: getattr(direct, part) for part in PARTS}


def test_a_failing_family_stays_in_its_row(plugins: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    draw = evaluation.family_task

    def broken(task_id: str, seed: int):
        if task_id == "dt_staff":
            raise RuntimeError("generator broke")
        return draw(task_id, seed)

    monkeypatch.setattr(evaluation, "family_task", broken)
    result = evaluate_planner(
        "evalplanners:FailsOnRag", families=select_families(["rag_towns", "dt_staff", "dt_sales"]), seeds=[1, 2]
    )
    rows = {row["task_id"]: row for row in result["families"]}
    assert rows["dt_staff"]["error"] == "RuntimeError: generator broke"
    assert rows["rag_towns"]["error"] is None
    rag_runs = rows["rag_towns"]["runs"]["evalplanners:FailsOnRag"]
    assert [r["reason"] for r in rag_runs] == ["planner error: the planner raised RuntimeError: no idea about rag"] * 2
    assert rows["rag_towns"]["mean"]["evalplanners:FailsOnRag"]["S"] == 0 < rows["rag_towns"]["mean"]["good"]["S"]
    # where it plans as good does, it scores as good does: equal, not a win
    assert rows["dt_sales"]["mean"]["evalplanners:FailsOnRag"] == rows["dt_sales"]["mean"]["good"]
    assert rows["dt_sales"]["wins"] == {"above": 0, "equal": 2, "below": 0, "of": 2}
    text = render(result)
    assert "  error: RuntimeError: generator broke" in text
    assert all(len(line) <= 80 for line in text), [line for line in text if len(line) > 80]


def test_the_pay_line_of_a_reference_planner_names_it_once() -> None:
    """Issue 38: `dagnet eval naive` printed 'naive … naive' on its pay line."""
    result = evaluate_planner("naive", families=select_families(["dt_sales"]), seeds=[1])
    pay = [line for line in render(result) if line.startswith("  data_transform ")]
    assert len(pay) == 1 and pay[0].split()[1::2] == ["naive", "good", "ref.naive", "margin"], pay


def test_an_invalid_plan_says_why_node_by_node(plugins: Path) -> None:
    result = evaluate_planner("evalplanners:WrongField", families=select_families(["rag_towns"]), seeds=[1])
    (run,) = result["families"][0]["runs"]["evalplanners:WrongField"]
    assert run["score"]["S"] == 0
    assert run["status"] == "partial" and run["nodes"]["reply"].startswith("missing_field:${hits.output")
    assert "    node reply: missing_field:${hits.output.artifacts.metadata.hits.0.text}" in render(result)

    rejected = evaluate_planner("evalplanners:Teleports", families=select_families(["rag_towns"]), seeds=[1])
    (run,) = rejected["families"][0]["runs"]["evalplanners:Teleports"]
    assert run["status"] == "invalid" and run["reason"].startswith("invalid plan:")
    assert run["findings"] == ["node reply: unknown action 'teleport'"]
    assert "    node reply: unknown action 'teleport'" in render(rejected)


def _runs(label: str, scores: list[float], digest: str | None = None) -> list[Run]:
    return [
        Run(label, "t", "agent", seed, score={"S": s}, digest=digest or f"{label}{seed}", outcome=f"{label}{seed}")
        for seed, s in enumerate(scores)
    ]


def test_the_weight_share_is_what_a_validator_pays_over_good() -> None:
    good, naive = _runs("good", [0.8, 0.7, 0.8, 0.9]), _runs("naive", [0.6, 0.5, 0.0, 0.7])
    better = paid_shares("mine", {"mine": _runs("mine", [0.85, 0.75, 0.85, 0.95]), "good": good, "naive": naive})
    assert better.weights["planner"] == pytest.approx(1 - FLOOR) and better.margin["mean"] == pytest.approx(0.05)
    assert better.weights["naive"] < better.weights["good"]
    # good's own plan is a copy of the reference: nobody beats it; the planner, first committed,
    # holds that answer's part of the floor, good's later copy nothing, naive less
    copy = paid_shares("mine", {"mine": _runs("good", [0.8, 0.7, 0.8, 0.9]), "good": good, "naive": naive})
    assert copy.weights["planner"] > copy.weights["naive"] > 0 and copy.weights["good"] == 0.0
    assert copy.margin == {"mean": 0.0}
    assert sum(copy.weights.values()) == pytest.approx(1.0)


@pytest.mark.e2e
def test_cli_prints_json_and_refuses_unknown_names(tmp_path: Path) -> None:
    done = subprocess.run(
        [*DAGNET, "eval", "naive", "--family", "dt_sales", "--seeds", "1", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["seeds"] == [1] and result["types"]["all"]["families"] == 1
    assert set(result["types"]["all"]["weights"]) == {"planner", "good", "naive"}
    for args, message in (
        (["psychic"], "unknown planner 'psychic'"),
        (["good", "--family", "nope"], "unknown task family 'nope'"),
        (["good", "--type", "poetry"], "unknown task type 'poetry'"),
    ):
        refused = subprocess.run([*DAGNET, "eval", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and message in refused.stderr, refused.stderr


def test_by_default_eval_sends_what_a_validator_sends(plugins: Path) -> None:
    """Each instance at the tier the validator's draw gives it, some as synthetic variants,
    drawn families labelled as such; summed up per tier and per kind."""
    import evalplanners

    curated = select_families(["dt_sales", "rag_towns", "agent_trip"])
    drawn = curated[2]  # stands in for a drawn family: the label comes from the mapping
    seeds = range(1, 9)
    secret = next(s for s in range(1, 100) if step_tier(s, 0, drawn.task_id, {drawn.task_id: 3}) != "full")
    result = evaluate_planner(
        "evalplanners:Records", families=curated, seeds=seeds, mix=Mix(secret=secret), drawn={drawn.task_id: 3}
    )
    runs = [run for row in result["families"] for run in row["runs"]["evalplanners:Records"]]
    mapping = {drawn.task_id: 3}
    assert [run["tier"] for run in runs] == [
        step_tier(secret, seed, f.task_id, mapping) for f in curated for seed in seeds
    ]
    assert {run["tier"] for run in runs if run["task_id"] != drawn.task_id} == {"full"}  # curated: full only
    assert len({run["tier"] for run in runs if run["task_id"] == drawn.task_id}) == 1  # drawn: its tempo's tier
    sent = {(task_id, tier) for task_id, tier, _ in evalplanners.SEEN}
    assert {tier for _, tier in sent} == {"full", step_tier(secret, 0, drawn.task_id, mapping)}
    synthetic = [run for run in runs if run["kind"] == "synthetic"]
    assert synthetic and any(task_id.startswith(SYNTHETIC_PREFIX) for task_id, _ in sent)
    assert {run["kind"] for run in runs if run["task_id"] == drawn.task_id} <= {"drawn", "synthetic"}
    assert "drawn" in {run["kind"] for run in runs}
    assert set(result["tiers"]) == {run["tier"] for run in runs} | {"all"}
    assert set(result["kinds"]) == {"curated", "drawn", "synthetic", "all"}
    assert sum(result["tiers"][t]["instances"] for t in TIERS if t in result["tiers"]) == len(runs)
    assert len(runs) == result["kinds"]["all"]["instances"]
    text = render(result)
    assert any(line.startswith("full (") for line in text) and any(line.startswith("synthetic (") for line in text)
    assert "curated at full; drawn at their tempo's draw: 0.2 full / 0.3 outline / 0.5 goal" in " ".join(
        line.strip() for line in text
    )


def test_tier_narrows_the_mix(plugins: Path) -> None:
    result = evaluate_planner(
        "evalplanners:Records", families=select_families(["dt_sales"]), seeds=range(1, 7), mix=Mix(tier="outline")
    )
    assert set(result["tiers"]) == {"outline", "all"} and result["tier"] == "outline"


def _eval(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DAGNET, "eval", *args, "--family", "dt_sales", "--seeds", "1", "--json"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_planner_options_apply_as_the_miner_applies_them_or_are_refused(plugins: Path) -> None:
    """`--set planner.options.*` reaches the planner without `planner.name` (as `dagnet miner
    --planner` applies it); an option the planner does not take is refused with the reason."""
    applied = _eval("evalplanners:Records", "--set", "planner.options.refuse=yes-sir", cwd=plugins)
    assert applied.returncode == 0, applied.stderr
    (run,) = json.loads(applied.stdout)["families"][0]["runs"]["evalplanners:Records"]
    assert run["reason"].endswith("refused: yes-sir")
    refused = _eval("evalplanners:Records", "--set", "planner.options.colour=1", cwd=plugins)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "colour" in refused.stderr, refused.stderr


def test_eval_in_a_world_sends_its_forecast_as_a_validator_does(plugins: Path) -> None:
    """``--world T``: every package carries the forecast of tempo T from the worlds published
    before it, so a planner on it alone plans the validator's reference and scores its S."""
    import evalplanners

    from planners.public import reference_plan
    from subnets.forecast import published_forecast
    from subnets.world import world_for

    families = select_families(["rag_towns", "dt_sales"])
    mix = Mix(tier="full", synthetic_rate=0.0, secret=11, world="4")
    result = evaluate_planner("evalplanners:Told", families=families, seeds=[1], mix=mix)
    assert evalplanners.FORECASTS == [(4, evaluation.EVAL_VALIDATOR)] * 2
    for family, row in zip(families, result["families"]):
        (run,) = row["runs"]["evalplanners:Told"]
        task = family_task(family.task_id, 1)
        prior = published_forecast(world_for, 11, 4, task.available_tools)
        assert run["digest"] == plan_digest(reference_plan(task.package(), prior).plan)
