"""``agent`` families: multi-step jobs over hidden entities and numbers, judged by a
goal checklist.

Two shapes. *Lookup and compute*: an instance's documents, held by retrieval subnets
under the id its ``collection`` input names (as in the rag families), state a figure
for each of several invented subjects; the plan finds two subjects' figures with
``search(collection=...)``, pulls the numbers out, combines them with the calculator and
reports JSON.
*Compute*: the hidden numbers are inputs themselves (amounts, rates, quantities); the
plan runs independent calculations in parallel and reports them. The checklist holds
the drawn subjects and the computed values, so only a plan that ran this instance's
inputs through the tools passes it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protocol.dataref import INPUT, ref

from .family import Family
from .held import held_id
from .profiles import make_family, step
from .rag_families import DOMAINS, Domain, collection_inputs, fact_documents
from .seed import Draw

_NUMBER = r"-?\d+"


def tidy(value: float) -> int | float:
    """A number as the calculator reports it: 12 significant digits, integral ones as ints."""
    value = float(f"{value:.12g}")
    return int(value) if value.is_integer() and abs(value) < 1e15 else value


def _checklist(values: dict[str, Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"type": "json_key", "key": key, "equals": value} for key, value in values.items()]
    items += [
        {"type": "regex", "pattern": _whole_number(value)}
        for value in values.values()
        if isinstance(value, (int, float))
    ]
    return items


def _whole_number(value: float) -> str:
    """A pattern that finds ``value`` written out as a whole number token: ``3`` is not
    found inside ``134``, ``-3`` or ``3.5`` (a substring keyword would credit another instance's
    answer for sharing a digit)."""
    return rf"(?<![\d.\-]){re.escape(str(value))}(?![\d]|\.\d)"


@dataclass(frozen=True, slots=True)
class Combine:
    name: str
    wording: str
    expression: str  # over {a} and {b}
    fn: Callable[[int, int], float]


_COMBINES = (
    Combine("difference", "the first figure minus the second", "{a} - {b}", lambda a, b: a - b),
    Combine("total", "the sum of the two figures", "{a} + {b}", lambda a, b: a + b),
    Combine(
        "ratio",
        "the first figure divided by the second, rounded to 3 decimals",
        "round({a} / {b}, 3)",
        lambda a, b: round(a / b, 3),
    ),
)


def _lookup_family(index: int, domain: Domain, combine: Combine) -> Family:
    def generate(draw: Draw) -> tuple[dict[str, Any], ...]:
        documents, facts = fact_documents(domain, draw)
        first, second = draw.sample(list(facts), 2)
        value = tidy(combine.fn(facts[first][1], facts[second][1]))
        checklist = _checklist({"first": first, "second": second, combine.name: value})
        held = held_id(draw, "c")
        return {"subjects": [first, second], "collection": held}, {"goal_checklist": checklist}, {held: documents}

    steps = []
    for i in range(2):
        steps.append(
            step(
                f"find_{i}",
                "search",
                query=f"{ref(INPUT, 'subjects', i)} {domain.query}",
                collection=ref(INPUT, "collection"),
                k=1,
            )
        )
        steps.append(
            step(f"num_{i}", "text_transform", op="extract_regex", text=ref(f"find_{i}", "text"), pattern=_NUMBER)
        )
    expression = combine.expression.format(a=ref("num_0", "text"), b=ref("num_1", "text"))
    steps.append(step("calc", "calculator", expression=expression))
    report = '{{"first": "{a}", "second": "{b}", "%s": {v}}}' % combine.name
    steps.append(
        step(
            "report",
            "text_transform",
            op="template",
            text=report,
            values={"a": ref(INPUT, "subjects", 0), "b": ref(INPUT, "subjects", 1), "v": ref("calc", "text")},
        )
    )
    description = (
        f"The collection the input `collection` names states a figure for each of several {domain.name}. For "
        f"the two names in "
        f"`subjects`, find each one's figure and report JSON with keys `first` and `second` (the names) and "
        f"`{combine.name}`: {combine.wording}."
    )
    inputs = collection_inputs(domain.name)
    return make_family(index, f"agent_{combine.name}_{domain.name}", "agent", description, inputs, steps, generate)


@dataclass(frozen=True, slots=True)
class Formula:
    """One calculation over hidden inputs: an expression template over ``{name}`` inputs
    and the same calculation in Python."""

    key: str
    expression: str
    fn: Callable[[dict[str, Any]], float]


@dataclass(frozen=True, slots=True)
class Job:
    name: str
    description: str
    inputs: dict[str, tuple[int, int]]  # name -> drawn range
    formulas: tuple[Formula, ...]


JOBS = (
    Job(
        "savings",
        "Given `principal`, yearly `rate` (percent) and `years`, report JSON with `compound` "
        "(principal grown at the rate, compounded yearly, rounded to cents) and `simple` (simple interest "
        "only, rounded to cents).",
        {"principal": (500, 50_000), "rate": (1, 12), "years": (1, 30)},
        (
            Formula(
                "compound",
                "round({principal} * (1 + {rate} / 100) ** {years}, 2)",
                lambda p: round(p["principal"] * (1 + p["rate"] / 100) ** p["years"], 2),
            ),
            Formula(
                "simple",
                "round({principal} * {rate} / 100 * {years}, 2)",
                lambda p: round(p["principal"] * p["rate"] / 100 * p["years"], 2),
            ),
        ),
    ),
    Job(
        "invoice",
        "Given quantities `q1`..`q3` and unit prices in cents `c1`..`c3`, report JSON with each "
        "line's amount in cents (`line1`..`line3`) and `total` in cents.",
        {"q1": (1, 40), "q2": (1, 40), "q3": (1, 40), "c1": (50, 9_999), "c2": (50, 9_999), "c3": (50, 9_999)},
        (
            Formula("line1", "{q1} * {c1}", lambda p: p["q1"] * p["c1"]),
            Formula("line2", "{q2} * {c2}", lambda p: p["q2"] * p["c2"]),
            Formula("line3", "{q3} * {c3}", lambda p: p["q3"] * p["c3"]),
            Formula(
                "total",
                "{q1} * {c1} + {q2} * {c2} + {q3} * {c3}",
                lambda p: p["q1"] * p["c1"] + p["q2"] * p["c2"] + p["q3"] * p["c3"],
            ),
        ),
    ),
    Job(
        "trip",
        "Given `distance_km`, `speed_kmh` and fuel use `litres_per_100km`, report JSON with `hours` "
        "(distance over speed, 2 decimals) and `litres` (fuel used, 2 decimals).",
        {"distance_km": (20, 3_000), "speed_kmh": (30, 130), "litres_per_100km": (3, 25)},
        (
            Formula(
                "hours", "round({distance_km} / {speed_kmh}, 2)", lambda p: round(p["distance_km"] / p["speed_kmh"], 2)
            ),
            Formula(
                "litres",
                "round({distance_km} * {litres_per_100km} / 100, 2)",
                lambda p: round(p["distance_km"] * p["litres_per_100km"] / 100, 2),
            ),
        ),
    ),
    Job(
        "recipe",
        "A recipe for `base_servings` needs `flour_g` grams of flour and `sugar_g` grams of sugar. "
        "Report JSON with `flour` and `sugar` scaled to `servings`, rounded to whole grams.",
        {"base_servings": (2, 8), "servings": (1, 40), "flour_g": (100, 2_000), "sugar_g": (20, 900)},
        (
            Formula(
                "flour",
                "round({flour_g} * {servings} / {base_servings})",
                lambda p: round(p["flour_g"] * p["servings"] / p["base_servings"]),
            ),
            Formula(
                "sugar",
                "round({sugar_g} * {servings} / {base_servings})",
                lambda p: round(p["sugar_g"] * p["servings"] / p["base_servings"]),
            ),
        ),
    ),
)


def _job_family(index: int, job: Job) -> Family:
    def generate(draw: Draw) -> tuple[dict[str, Any], dict[str, Any]]:
        params = {name: draw.int(low, high) for name, (low, high) in job.inputs.items()}
        values = {f.key: tidy(f.fn(params)) for f in job.formulas}
        return params, {"goal_checklist": _checklist(values)}

    inputs = {name: ref(INPUT, name) for name in job.inputs}
    steps = [step(f"calc_{f.key}", "calculator", expression=f.expression.format(**inputs)) for f in job.formulas]
    report = "{{" + ", ".join(f'"{f.key}": {{{f.key}}}' for f in job.formulas) + "}}"
    steps.append(
        step(
            "report",
            "text_transform",
            op="template",
            text=report,
            values={f.key: ref(f"calc_{f.key}", "text") for f in job.formulas},
        )
    )
    schema = {
        "type": "object",
        "required": list(job.inputs),
        "properties": {name: {"type": "integer"} for name in job.inputs},
    }
    return make_family(index, f"agent_{job.name}", "agent", job.description, schema, steps, generate)


def families(start: int) -> list[Family]:
    """Six lookup-and-compute families and four compute families."""
    lookups = [_lookup_family(start + i, DOMAINS[i], _COMBINES[i % len(_COMBINES)]) for i in range(6)]
    jobs = [_job_family(start + 6 + i, job) for i, job in enumerate(JOBS)]
    return lookups + jobs
