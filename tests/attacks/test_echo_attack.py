"""The echo miner: one node that copies the inputs into the answer, scored on a hidden instance.

For each agent family (curated and drawn) the miner reads a public example: every answer
key whose value is an input value there (an agent-lookup family's ``first`` and ``second``
are its ``subjects``) is filled from that input, by one ``template`` node; the other keys
are left out. Nothing is computed, so nothing may be earned: a checklist never credits
what the inputs already contain (scoring/quality/agent.py). Before that rule the echo
scored quality 0.5, S 0.35, on every lookup family at every tier.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from planners.attackers import answer_plan
from protocol.dataref import INPUT, ref
from protocol.plan import WorkflowPlan
from protocol.synapse import TaskPackage
from support.attacks import gather, scored_run
from tasks import Family, load_families
from tasks.drawn import drawn_families

HIDDEN = (4242, 90210)


def _families() -> list[Family]:
    """The curated and drawn agent families (drawn when a test runs, not at collection)."""
    return [f for f in (*load_families(), *drawn_families(1, 0, 40)) if f.task_type == "agent"]


def _paths(value: Any, path: tuple[str | int, ...] = ()) -> dict[str, tuple[str | int, ...]]:
    """Each scalar input value (as JSON) -> the input path holding it."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _paths(item, (*path, key)).items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in _paths(item, (*path, i)).items()}
    return {json.dumps(value): path}


def echo_plan(package: TaskPackage) -> WorkflowPlan | None:
    """One template node answering each key the first example's inputs hold, from those inputs."""
    example = package.examples[0]
    where = _paths(example.inputs)
    echoed = {
        key: where[json.dumps(value)] for key, value in example.output["json"].items() if json.dumps(value) in where
    }
    if not echoed:
        return None
    plan = answer_plan(package, "x")
    text = "{{" + ", ".join(f'"{key}": "{{{key}}}"' for key in echoed) + "}}"
    node = plan.nodes[0].model_copy(
        update={
            "action": "text_transform",
            "params": {
                "op": "template",
                "text": text,
                "values": {key: ref(INPUT, *path) for key, path in echoed.items()},
            },
        }
    )
    return plan.model_copy(update={"nodes": [node]})


def test_an_echo_of_the_inputs_earns_nothing() -> None:
    runs = [
        (family, seed, plan)
        for family in _families()
        if (plan := echo_plan(family.package)) is not None
        for seed in HIDDEN
    ]
    assert len({family.task_id for family, _, _ in runs}) >= 6  # every lookup family echoes its subjects

    async def score(family: Family, seed: int, plan: WorkflowPlan) -> tuple[float, float]:
        report = await scored_run(plan, family.task(family.instance(seed)))
        return report["score"]["S"], report["score"]["output_quality"]

    scores = asyncio.run(gather([score(*run) for run in runs]))
    assert {(family.task_id, seed): found for (family, seed, _), found in zip(runs, scores) if found[0] > 0} == {}
