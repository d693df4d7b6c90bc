"""What a family offers and allows: subnets with prices, latencies and flakiness, the
budget and latency limits, the routing policy; and the builder that puts a family
together.

Each family draws its subnet listing from one of four scenarios (pricey first, flaky
first, cheap first, slow first), so a plan that takes the first listed subnet of each
type and chains the steps pays in cost, latency or failures, while a planner that
reads the table does not. Every fifth family also bars one attractive subnet. The
profile is fixed per family (drawn from its id); only the inputs vary per instance.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from protocol.actions import TOOL_TYPES
from protocol.synapse import StepHint, TaskPackage

from .family import Family, Generator
from .seed import Draw, text_seed

__all__ = ["make_family", "step"]

_KIND_OF = {action: kind for kind, actions in TOOL_TYPES.items() for action in actions}

# per tool type: (premium, budget, flaky, slow) subnet names
_NAMES = {
    "retrieval": ("sn5", "sn18", "sn22", "sn31"),
    "text": ("sn1", "sn9", "sn13", "sn27"),
    "math": ("sn3", "sn7", "sn19", "sn33"),
    "data": ("sn8", "sn12", "sn24", "sn40"),
    "exec": ("sn2", "sn6", "sn17", "sn45"),
}
_SCENARIOS = ("pricey_first", "flaky_first", "cheap_first", "slow_first")


def step(step_id: str, action: str, **params: Any) -> StepHint:
    """A step hint; its kind is the tool type that offers ``action``."""
    return StepHint(id=step_id, action=action, kind=_KIND_OF[action], params=params)


def make_family(
    index: int,
    task_id: str,
    task_type: str,
    description: str,
    inputs: dict[str, Any],
    steps: Sequence[StepHint],
    generate: Generator,
    *,
    extra_latency: float = 0.0,
    quality_criteria: dict[str, Any] | None = None,
    program: Sequence[StepHint] = (),
) -> Family:
    """A family whose profile follows scenario ``index mod 4``; the example is its public instance."""
    draw = Draw(text_seed(f"dagnet family profile:{index}:{task_id}"))
    kinds = list(dict.fromkeys(s.kind for s in steps))
    tools = _subnets(kinds, _SCENARIOS[index % len(_SCENARIOS)], draw, flaky_kind=kinds[index % len(kinds)])
    barred = {_cheapest_later(tools, kinds[0])} if index % 5 == 2 else set()
    allowed = [name for name in tools if name not in barred]
    routing = _routing(index, kinds)
    budget = _r(_naive_cost(tools, allowed, steps, routing) * (1.3 + draw.below(500) / 1000))
    latency = round(_naive_latency(tools, allowed, steps) * (1.6 + draw.below(400) / 1000) + extra_latency, 2)
    package = TaskPackage(
        task_id=task_id,
        task_type=task_type,
        description=description,
        inputs=inputs,
        quality_criteria=quality_criteria or {},
        constraints={"max_budget_tao": budget, "max_latency_seconds": latency, "allowed_subnets": allowed},
        available_tools=tools,
        routing_policy=routing,
        steps=list(steps),
    )
    family = Family(package, generate)
    update = {"example": family.example().inputs, "examples": family.public_examples()}
    return Family(package.model_copy(update=update), generate, tuple(program))


def _r(x: float) -> float:
    return float(f"{x:.6g}")


def _subnets(kinds: list[str], scenario: str, draw: Draw, flaky_kind: str) -> dict[str, dict[str, Any]]:
    tools: dict[str, dict[str, Any]] = {}
    for kind in kinds:
        premium, budget, flaky, slow = _NAMES[kind]
        base = (1 + draw.below(3000)) / 1_000_000 + 0.001
        offers = {
            premium: {
                "type": kind,
                "avg_cost": _r(base * (3 + draw.below(2000) / 1000)),
                "avg_latency": _ms(draw, 20, 50),
            },
            budget: {"type": kind, "avg_cost": _r(base), "avg_latency": _ms(draw, 60, 120)},
            flaky: {
                "type": kind,
                "avg_cost": _r(base * (0.35 + draw.below(250) / 1000)),
                "avg_latency": _ms(draw, 30, 80),
                "fail_first": 1,
            },
            slow: {
                "type": kind,
                "avg_cost": _r(base * (0.5 + draw.below(300) / 1000)),
                "avg_latency": _ms(draw, 250, 300),
            },
        }
        order = {
            "pricey_first": [premium, budget, flaky, slow],
            "flaky_first": [flaky, premium, budget] if kind == flaky_kind else [premium, budget, flaky],
            "cheap_first": [budget, flaky, premium],
            "slow_first": [slow, budget, premium],
        }[scenario]
        tools.update({name: offers[name] for name in order})
    return tools


def _ms(draw: Draw, low: int, high: int) -> float:
    return draw.int(low, high) / 1000


def _routing(index: int, kinds: list[str]) -> dict[str, Any]:
    """One provider by default; every third family asks for two on one premium subnet."""
    policy: dict[str, Any] = {"default": {"top_k": 1, "aggregation": "majority_vote"}}
    if index % 3 == 0:
        aggregation = "median_logit" if kinds[-1] == "math" else "majority_vote"
        policy[_NAMES[kinds[-1]][0]] = {"top_k": 2, "aggregation": aggregation}
    return policy


def _first_allowed(tools: dict[str, dict[str, Any]], allowed: list[str]) -> dict[str, str]:
    first: dict[str, str] = {}
    for name in allowed:
        first.setdefault(tools[name]["type"], name)
    return first


def _naive_cost(tools: dict, allowed: list[str], steps: Sequence[StepHint], routing: dict) -> float:
    """What the first-listed subnets cost with the attempts they need: a budget a plain
    plan that retries could meet."""
    first = _first_allowed(tools, allowed)
    default = routing["default"]["top_k"]

    def cost(name: str) -> float:
        info = tools[name]
        return info["avg_cost"] * (1 + info.get("fail_first", 0)) * routing.get(name, {}).get("top_k", default)

    return sum(cost(first[s.kind]) for s in steps)


def _naive_latency(tools: dict, allowed: list[str], steps: Sequence[StepHint]) -> float:
    first = _first_allowed(tools, allowed)
    return sum(tools[first[s.kind]]["avg_latency"] for s in steps)


def _cheapest_later(tools: dict[str, dict[str, Any]], kind: str) -> str:
    """The subnet of ``kind``, not listed first, that is cheapest counting its retries."""
    listed = [name for name, info in tools.items() if info["type"] == kind][1:]
    return min(listed, key=lambda n: tools[n]["avg_cost"] * (1 + tools[n].get("fail_first", 0)))
