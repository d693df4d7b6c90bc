"""One node is never enough: for every family, curated and drawn, every one-node plan on
every allowed subnet scores no more than the naive chain on the same hidden instance.

The one-node plans a miner would try (issue 21):

- ``literal``: the answer of another instance (the chain's final output on a public
  example), emitted by a text node (for code, the example's module), a data node, a
  search over a one-document collection it brings, or a ``python_exec`` that prints it;
- ``inputs``: a template over every input (``${input.x}`` for each), as text, as JSON on a
  data subnet, and for code the example module with the inputs written into it;
- ``exec``: one ``python_exec`` program given every input (on stdin) that prints the
  answer or, for code, is the module itself;
- ``held``: one ``search`` or one ``csv_to_json`` on the held data (all subjects in one query);
- ``hint``: each hinted step that reads only the inputs, alone (one search, one calculation).

The bar is the naive chain's S on the instance; where its first listed subnet fails every
first attempt (the flaky-first profiles), naive scores 0 by the profile and not by the
task, and the bar is the same chain with one retry per node (``naive+retries``). A plan
that computes from this instance (``inputs``, ``held``, ``hint``) must stay under the bar
on every instance. A plan that carries another instance's answer is held to the bar on
every instance but those where the two instances' answers agree (for code: the two config
rows were drawn alike, 1 in 25 for a Caesar shift); how often that happens is measured
over many seeds and bounded (:data:`MAX_AGREEING`).

Runs are owned executions on the simulated clock, as ``dagnet run --task`` scores them,
except that ``python_exec`` outcomes are kept per program (the sandbox is deterministic and
the subnet only prices and delays it), and families are scored on a few threads: the
sandbox, not the CPU, is what takes the time.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest

from bench.tasks import propose
from engine.owned import evaluate_owned
from protocol.dataref import INPUT, find_refs, ref
from protocol.plan import WorkflowPlan
from protocol.runner import NodeRunner
from protocol.task import Task
from protocol.validation import check_plan_for
from subnets.base import ToolContext, ToolRegistry, ToolResult
from subnets.holdings import holding
from subnets.registry import default_registry
from subnets.runner import LocalRunner
from tasks import Family, load_families
from tasks.family import Instance, example_output
from tasks.seed import public_seed

SEEDS = (4242, 90210)
CHAINS = ("naive", "naive+retries")


def _drawn() -> tuple[Family, ...]:
    try:
        from tasks.drawn import drawn_families
    except ImportError:  # pragma: no cover - until tasks/drawn.py lands
        return ()
    return drawn_families(secret=1, tempo=0, count=40)


def _registry() -> ToolRegistry:
    """The reference tools, ``python_exec`` answering a program it has run before from memory."""
    registry = default_registry()
    spec = registry.get("python_exec")
    assert spec is not None
    seen: dict[str, ToolResult] = {}
    lock = threading.Lock()

    async def remembered(params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        key = json.dumps([params, ctx.timeout_seconds], sort_keys=True)
        with lock:
            known = seen.get(key)
        if known is None:
            known = seen.setdefault(key, await spec.fn(params, ctx))
        return known

    tools = ToolRegistry()
    for name in registry.names():
        found = registry.get(name)
        assert found is not None
        tools.register(replace(found, fn=remembered) if name == "python_exec" else found)
    return tools


REGISTRY = _registry()


def _runner(task: Task) -> NodeRunner:
    """``owned_runner(task)`` over :data:`REGISTRY`."""
    return holding(LocalRunner(REGISTRY, subnets=task.available_tools), task.holdings)


def _score(plan: WorkflowPlan, task: Task, estimate: float = 0.0) -> tuple[float, float]:
    """(S, output quality) of ``plan`` on ``task``, as a validator's owned execution scores it."""
    check = check_plan_for(plan, task)
    assert check.valid, (task.task_id, check.errors, check.node_errors)
    score = evaluate_owned(plan, check, task, _runner(task), total_estimated_cost=estimate).score
    return score.S, score.output_quality


def _other_answer(family: Family) -> dict[str, Any]:
    """The chain's final output on a public example: another instance's literal answer."""
    proposal = propose(family, "naive+retries")
    task = family.task(_copied(family))
    check = check_plan_for(proposal.plan, task)
    execution = evaluate_owned(
        proposal.plan, check, task, _runner(task), total_estimated_cost=proposal.total_estimated_cost
    ).execution
    output = execution.final_output
    assert output is not None, f"{family.task_id}: the chain fails on its own public example"
    return {"text": output["text"], "code": output["artifacts"]["code"]}


def _node(node_id: str, subnet: str, action: str, params: dict[str, Any]) -> WorkflowPlan:
    return WorkflowPlan.model_validate(
        {"nodes": [{"id": node_id, "subnet": subnet, "action": action, "params": params}]}
    )


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _attacks(family: Family, task: Task, answer: dict[str, Any]) -> Iterator[tuple[str, WorkflowPlan]]:
    """Every one-node plan of the module docstring, on every allowed subnet, named
    ``kind@subnet`` (the kinds in :data:`CARRY_ANSWER` carry another instance's answer)."""
    package = task.package()
    names = list(package.inputs.get("properties", {}))
    code = family.task_type == "code"
    literal = answer["code"] if code else answer["text"]
    spaced = " ".join(f"{{{name}}}" for name in names)
    values = {name: ref(INPUT, name) for name in names}
    queries = [str(step.params["query"]) for step in package.steps if step.action == "search"]
    for subnet in package.constraints.allowed_subnets or list(package.available_tools):
        kind = package.available_tools[subnet].type
        for name, action, params in _per_kind(kind, code, literal, spaced, values, names, queries):
            yield f"{name}@{subnet}", _node("attack", subnet, action, params)
        for hint in package.steps:
            sources = {r.node_id for r in find_refs(hint.params)}
            if hint.kind == kind and sources <= {INPUT}:
                yield f"hint:{hint.id}@{subnet}", _node("attack", subnet, hint.action, hint.params)


def _per_kind(
    kind: str,
    code: bool,
    literal: str,
    spaced: str,
    values: dict[str, str],
    names: list[str],
    queries: list[str],
) -> Iterator[tuple[str, str, dict[str, Any]]]:
    module = f"```python\n# {spaced}\n{literal}```\n"
    if kind == "text":
        if code:
            yield "literal", "text_transform", {"op": "extract_code_block", "text": f"```python\n{literal}```\n"}
            yield "module", "text_transform", {"op": "template", "text": module, "values": values}
            return
        yield "literal", "text_transform", {"op": "strip", "text": literal}
        yield "inputs", "text_transform", {"op": "template", "text": spaced, "values": values}
    elif kind == "data":
        if not code:
            yield "literal", "json_transform", {"data": _json_or_text(literal), "ops": []}
        yield "inputs", "json_transform", {"data": values, "ops": []}
        if "table" in names:
            yield "held", "csv_to_json", {"table": ref(INPUT, "table"), "numeric": True}
    elif kind == "retrieval":
        if literal.strip():
            yield (
                "literal",
                "search",
                {"query": literal[:200], "k": 1, "documents": [{"id": "answer", "title": "", "text": literal}]},
            )
        if "collection" in names:
            query = " ".join(queries) or " ".join(f"{{{name}}}" for name in names)
            yield "held", "search", {"query": query[:1000], "collection": ref(INPUT, "collection"), "k": 20}
    elif kind == "exec":
        stdin = json.dumps({name: value for name, value in values.items()})
        program = literal if code else f"import sys\nsys.stdin.read()\nprint({literal!r})\n"
        yield "exec", "python_exec", {"code": program, "stdin": stdin}


CARRY_ANSWER = frozenset({"literal", "module", "exec"})
"""Attacks that emit another instance's answer (a module with its constants, for code)."""


def _findings(family: Family) -> list[str]:
    """What beats the bar on ``family``: one line per attack, empty when nothing does."""
    answer, other = _other_answer(family), _copied(family)
    chains = [propose(family, strategy) for strategy in CHAINS]
    found = []
    for seed in SEEDS:
        hidden = family.instance(seed)
        task = family.task(hidden)
        naive, retries = (_score(proposal.plan, task, proposal.total_estimated_cost)[0] for proposal in chains)
        bar, agrees = naive if naive > 0 else retries, _agrees(family.task_type, hidden, other)
        for name, plan in _attacks(family, task, answer):
            s, quality = _score(plan, task)
            if s > bar and not (name.split("@")[0] in CARRY_ANSWER and agrees):
                found.append(
                    f"{family.task_id} seed {seed} {name}: S {s:.3f} (quality {quality:.2f}) "
                    f"> naive {naive:.3f} / naive+retries {retries:.3f}"
                )
    return found


def _copied(family: Family) -> Instance:
    """The public example whose answer the attacks copy."""
    return family.instance(public_seed(family.task_id, 1))


def _agrees(task_type: str, hidden: Instance, other: Instance) -> bool:
    """Whether ``hidden`` has the answer of ``other`` (:func:`_copied`; for code, the same
    config row: the same module)."""
    if task_type == "code":
        return list(hidden.holdings.values()) == list(other.holdings.values())
    return example_output(task_type, hidden.reference) == example_output(task_type, other.reference)


MAX_AGREEING = 0.05
"""The largest share of instances whose answer may be another instance's."""


def _all_findings(families: tuple[Family, ...]) -> dict[str, list[str]]:
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip((f.task_id for f in families), pool.map(_findings, families)))


@pytest.fixture(scope="module")
def curated() -> dict[str, list[str]]:
    return _all_findings(load_families())


@pytest.fixture(scope="module")
def drawn() -> dict[str, list[str]]:
    families = _drawn()
    if not families:
        pytest.skip("tasks.drawn (families drawn per tempo) is not on this checkout yet")
    return _all_findings(families)


@pytest.mark.e2e
@pytest.mark.parametrize("task_type", ["data_transform", "rag", "agent", "code"])
def test_no_one_node_plan_beats_the_chain_on_a_curated_family(curated, task_type: str) -> None:
    families = [f.task_id for f in load_families() if f.task_type == task_type]
    assert len(families) == 10
    assert [line for task_id in families for line in curated[task_id]] == []


@pytest.mark.parametrize("family", load_families(), ids=lambda f: f.task_id)
def test_another_instance_s_answer_is_rarely_this_one_s(family: Family) -> None:
    seeds = range(1000, 1200)
    other = _copied(family)
    share = sum(_agrees(family.task_type, family.instance(seed), other) for seed in seeds) / len(seeds)
    assert share <= MAX_AGREEING


@pytest.mark.e2e
def test_no_one_node_plan_beats_the_chain_on_forty_drawn_families(drawn) -> None:
    assert len(drawn) == 40
    assert [line for lines in drawn.values() for line in lines] == []
