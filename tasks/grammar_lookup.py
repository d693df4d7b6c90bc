"""The retrieval productions of the family grammar: a drawn domain (a subject noun, a
fact sentence with its unit and value range), then search per subject → join (``rag``),
or search per subject → extract the numbers → combine them with a drawn expression →
report JSON (``agent``).

The families are built by the curated builders (``rag_families._family``,
``agent_families._lookup_family``), so they hold their documents the way the curated
ones do. Neighbours: for ``rag``, the same sentences in another order; for ``agent``,
every other combination of the two figures, the same one with the figures swapped, and
either figure alone (a program that reads one subject: when every example's ``larger``
is its second figure, the examples cannot tell ``max(a, b)`` from ``b``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .agent_families import Combine, _lookup_family, tidy
from .family import Instance
from .grammar import Production, held_documents
from .rag_families import Domain
from .rag_families import _family as _rag_family
from .seed import Draw

__all__ = ["COMBINES", "draw_lookup", "draw_rag"]

_KINDS = (  # plural, how a subject is named, the word a search adds
    ("lakes", "Lake {name}", "lake"), ("castles", "{name} Castle", "castle"), ("valleys", "The {name} Valley", "valley"),
    ("observatories", "The {name} Observatory", "observatory"), ("vineyards", "The {name} Vineyard", "vineyard"),
    ("glaciers", "The {name} Glacier", "glacier"), ("markets", "The {name} Market", "market"),
    ("stadiums", "{name} Stadium", "stadium"), ("forests", "The {name} Forest", "forest"),
    ("canals", "The {name} Canal", "canal"), ("orchards", "The {name} Orchard", "orchard"),
)
_MEASURES = (  # what the sentence says after the subject, the words a search adds, the value range
    ("covers {value} hectares", "covers hectares", 10, 90_000),
    ("lies at an altitude of {value} metres", "altitude metres", 1, 4_500),
    ("was first recorded in the year {value}", "first recorded year", 1100, 2020),
    ("welcomes {value} visitors a year", "welcomes visitors year", 1_000, 900_000),
    ("employs {value} workers", "employs workers", 5, 20_000),
    ("stretches for {value} kilometres", "stretches kilometres", 2, 900),
    ("holds {value} cubic metres of water", "holds cubic metres water", 100, 500_000),
)

COMBINES = (
    Combine("difference", "the first figure minus the second", "{a} - {b}", lambda a, b: a - b),
    Combine("total", "the sum of the two figures", "{a} + {b}", lambda a, b: a + b),
    Combine("ratio", "the first figure divided by the second, rounded to 3 decimals", "round({a} / {b}, 3)",
            lambda a, b: round(a / b, 3)),
    Combine("gap", "the absolute difference of the two figures", "abs({a} - {b})", lambda a, b: abs(a - b)),
    Combine("mean", "the mean of the two figures, rounded to 1 decimal", "round(({a} + {b}) / 2, 1)",
            lambda a, b: round((a + b) / 2, 1)),
    Combine("larger", "the larger of the two figures", "max({a}, {b})", max),
    Combine("smaller", "the smaller of the two figures", "min({a}, {b})", min),
    Combine("percent", "the first figure as a percentage of the second, rounded to 1 decimal",
            "round({a} * 100 / {b}, 1)", lambda a, b: round(a * 100 / b, 1)),
    Combine("double_plus", "twice the first figure plus the second", "2 * {a} + {b}", lambda a, b: 2 * a + b),
)
"""Every combination of the two figures the grammar draws from."""


def _domain(draw: Draw) -> Domain:
    plural, title, word = draw.choice(_KINDS)
    measure, words, low, high = draw.choice(_MEASURES)
    return Domain(plural, f"{title} {measure}.", f"{word} {words}", low, high)


def _figures(domain: Domain, instance: Instance) -> list[tuple[str, int]]:
    """Each subject's fact sentence and figure, in the order the inputs name them."""
    text = " ".join(doc["text"] for doc in held_documents(instance))
    found = []
    for subject in instance.inputs["subjects"]:
        pattern = re.escape(domain.fact).replace(re.escape("{name}"), re.escape(subject))
        match = re.search(pattern.replace(re.escape("{value}"), r"(-?\d+)"), text)
        if match is None:
            raise ValueError(f"no fact about {subject!r} in the instance's documents")
        found.append((match.group(0), int(match.group(1))))
    return found


def draw_rag(draw: Draw, index: int) -> Production:
    """A domain, asked about two or three subjects."""
    domain = _domain(draw)
    family = _rag_family(index, domain, draw.int(2, 3))
    neighbours = {"text": {
        "reversed": lambda i: " ".join(s for s, _ in reversed(_figures(domain, i))),
        "by_name": lambda i: " ".join(s for s, _ in sorted(_figures(domain, i), key=lambda f: f[0])),
    }}
    return Production(family, neighbours)


def _combined(domain: Domain, fn: Callable[[int, int], float]):
    def value(instance: Instance) -> Any:
        (_, a), (_, b) = _figures(domain, instance)
        return tidy(fn(a, b))
    return value


def _wrong_programs(combine: Combine) -> dict[str, Callable[[int, int], float]]:
    """What programs that are not ``combine`` answer: another combination, ``combine`` on
    the figures swapped, or one figure alone."""
    found: dict[str, Callable[[int, int], float]] = {other.name: other.fn for other in COMBINES if other is not combine}
    found |= {f"{combine.name} swapped": lambda a, b: combine.fn(b, a), "first alone": lambda a, b: a,
              "second alone": lambda a, b: b}
    return found


def draw_lookup(draw: Draw, index: int) -> Production:
    """A domain and a combination of two subjects' figures."""
    domain, combine = _domain(draw), draw.choice(COMBINES)
    family = _lookup_family(index, domain, combine)
    neighbours = {combine.name: {name: _combined(domain, fn) for name, fn in _wrong_programs(combine).items()}}
    return Production(family, neighbours)
