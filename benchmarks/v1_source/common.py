"""Shared generator machinery: subnets, scenarios, constraints."""
import random

KIND_OF = {"csv_to_json": "data", "json_transform": "data", "json_to_csv": "data",
           "text_transform": "text", "search": "retrieval", "calculator": "math",
           "python_exec": "exec", "echo": "text"}

# per kind: (premium, budget, flaky, slow) subnet names
NAMES = {
    "retrieval": ("sn5", "sn18", "sn22", "sn31"),
    "text": ("sn1", "sn9", "sn13", "sn27"),
    "math": ("sn3", "sn7", "sn19", "sn33"),
    "data": ("sn8", "sn12", "sn24", "sn40"),
    "exec": ("sn2", "sn6", "sn17", "sn45"),
}

SCENARIOS = ("pricey_first", "flaky_first", "cheap_first", "slow_first")


def r3(x):
    return float(f"{x:.6g}")


def step(sid, action, **params):
    return {"id": sid, "action": action, "kind": KIND_OF[action], "params": params}


def subnets_for(kinds, scenario, rng, flaky_kind):
    """available_tools for the kinds a task uses, listed per scenario."""
    tools = {}
    for kind in kinds:
        prem, bud, flk, slow = NAMES[kind]
        base = rng.uniform(0.001, 0.004)
        offers = {
            prem: {"type": kind, "avg_cost": r3(base * rng.uniform(3.0, 5.0)), "avg_latency": r3(rng.uniform(0.02, 0.05))},
            bud: {"type": kind, "avg_cost": r3(base), "avg_latency": r3(rng.uniform(0.06, 0.12))},
            flk: {"type": kind, "avg_cost": r3(base * rng.uniform(0.35, 0.6)), "avg_latency": r3(rng.uniform(0.03, 0.08)),
                  "fail_first": 1},
            slow: {"type": kind, "avg_cost": r3(base * rng.uniform(0.5, 0.8)), "avg_latency": r3(rng.uniform(0.25, 0.3))},
        }
        if scenario == "pricey_first":
            order = [prem, bud, flk, slow]
        elif scenario == "flaky_first":
            order = [flk, prem, bud] if kind == flaky_kind else [prem, bud, flk]
        elif scenario == "cheap_first":
            order = [bud, flk, prem]
        else:  # slow_first
            order = [slow, bud, prem]
        for name in order:
            tools[name] = offers[name]
    return tools


def naive_cost(tools, steps, routing):
    """Cost of the first-listed subnets, counting the attempts they need to succeed
    and the providers the routing policy asks for, so the budget is one a plain
    plan that retries could complete within."""
    first = {}
    for name, info in tools.items():
        first.setdefault(info["type"], name)
    default = routing.get("default", {}).get("top_k", 1)

    def cost(name):
        info = tools[name]
        return info["avg_cost"] * (1 + info.get("fail_first", 0)) * routing.get(name, {}).get("top_k", default)

    return sum(cost(first[s["kind"]]) for s in steps)


def naive_latency(tools, steps):
    first = {}
    for name, info in tools.items():
        first.setdefault(info["type"], info)
    return sum(first[s["kind"]]["avg_latency"] for s in steps)


def make_task(index, task_id, task_type, description, steps, reference, *, extra_latency=0.0,
              disallow=None, routing=None, quality_criteria=None):
    rng = random.Random(f"dagnet-v1:{task_id}")
    scenario = SCENARIOS[index % len(SCENARIOS)]
    kinds = list(dict.fromkeys(s["kind"] for s in steps))
    flaky_kind = kinds[index % len(kinds)]
    tools = subnets_for(kinds, scenario, rng, flaky_kind)
    # Every fifth task bars one subnet that a cost-minded planner would otherwise pick.
    barred = set(disallow or ())
    if index % 5 == 2:
        barred.add(_cheapest_later(tools, kinds[0]))
    allowed = [name for name in tools if name not in barred]
    usable = {name: tools[name] for name in allowed}
    routing = routing or _routing(index, kinds)
    budget = r3(naive_cost(usable, steps, routing) * rng.uniform(1.3, 1.8))
    latency = round(naive_latency(usable, steps) * rng.uniform(1.2, 1.5) + extra_latency, 2)
    return {
        "task_id": task_id,
        "task_type": task_type,
        "description": description,
        "quality_criteria": quality_criteria or {},
        "constraints": {"max_budget_tao": budget, "max_latency_seconds": latency, "allowed_subnets": allowed},
        "available_tools": tools,
        "routing_policy": routing,
        "steps": steps,
        "reference": reference,
    }


def _routing(index, kinds):
    """Default single provider; every third task asks for two providers on one
    premium subnet (numeric answers aggregated by median)."""
    policy = {"default": {"top_k": 1, "aggregation": "majority_vote"}}
    if index % 3 == 0:
        policy[NAMES[kinds[-1]][0]] = {"top_k": 2, "aggregation": "median_logit" if kinds[-1] == "math" else "majority_vote"}
    return policy


def _cheapest_later(tools, kind):
    """The subnet of ``kind``, not listed first, that is cheapest counting its retries."""
    listed = [name for name, info in tools.items() if info["type"] == kind][1:]
    return min(listed, key=lambda n: tools[n]["avg_cost"] * (1 + tools[n].get("fail_first", 0)))
