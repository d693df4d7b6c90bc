"""The retrieval productions of the family grammar: documents held in one to three
collections the inputs name, each about one kind of subject (lakes, castles...) with one
or two facts stated about every subject (*Lake X covers N hectares.*), then a search per
subject and fact → join the sentences (``rag``), or a search per figure → extract the
numbers → one or two drawn formulas over them (a later one may build on the earlier) →
report JSON (``agent``).

How many collections, how many subjects each input lists, how many facts are asked of
each subject and how the formulas are wired are drawn per family, so the number of reads
and where each reads from differ family by family. Each collection holds five generated
documents about invented subjects, with the facts' figures drawn per instance, mixed
with three shipped corpus documents, as the curated families hold theirs.

Neighbours: for ``rag``, the same sentences in another order (reversed, sorted, two
neighbours swapped); for ``agent``, every formula one change away and either figure
alone (a program that reads one subject: when every example's ``larger`` is its second
figure, the examples cannot tell ``max(a, b)`` from ``b``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protocol.dataref import INPUT, ref

from .agent_families import _NUMBER, _checklist
from .corpus import corpus_documents
from .family import Instance
from .grammar import Production
from .grammar_calc import draw_shapes, evaluate, expression, formula_neighbours, wording
from .held import collection_schema, held_id
from .profiles import make_family, step
from .rag_families import _CORPUS_DOCUMENTS, _FILLERS, _SUBJECTS, Domain, invented_names
from .seed import Draw

__all__ = ["Shelf", "draw_lookup", "draw_rag"]

_KINDS = (  # plural, how a subject is named, the word a search adds
    ("lakes", "Lake {name}", "lake"),
    ("castles", "{name} Castle", "castle"),
    ("valleys", "The {name} Valley", "valley"),
    ("observatories", "The {name} Observatory", "observatory"),
    ("vineyards", "The {name} Vineyard", "vineyard"),
    ("glaciers", "The {name} Glacier", "glacier"),
    ("markets", "The {name} Market", "market"),
    ("stadiums", "{name} Stadium", "stadium"),
    ("forests", "The {name} Forest", "forest"),
    ("canals", "The {name} Canal", "canal"),
    ("orchards", "The {name} Orchard", "orchard"),
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


_MAX_SHELVES = 3
_MAX_SEARCHES = 6
_LOOKUP_KEYS = ("result", "combined", "figure", "index", "measure", "score", "value", "outcome", "tally", "reading")


@dataclass(frozen=True, slots=True)
class Shelf:
    """One held collection: the input naming it (``lakes``), the input listing the subjects
    asked (``lake_names``), how many, and the facts stated about every subject (one
    :class:`Domain` per fact, all of one kind)."""

    collection: str
    names: str
    asked: int
    facts: tuple[Domain, ...]


def _shelves(draw: Draw, count: int, facts: Callable[[], int], asked: Callable[[], int]) -> list[Shelf]:
    shelves = []
    for plural, title, word in draw.sample(_KINDS, count):
        measures = draw.sample(_MEASURES, facts())
        domains = tuple(
            Domain(plural, f"{title} {measure}.", f"{word} {words}", low, high)
            for measure, words, low, high in measures
        )
        shelves.append(Shelf(plural, f"{word}_names", asked(), domains))
    return shelves


def _documents(shelf: Shelf, draw: Draw) -> tuple[list[dict[str, str]], list[str]]:
    """A collection: a document per invented subject stating each fact (its figure drawn),
    mixed with shipped documents in drawn order; and the subjects."""
    names = invented_names(draw, _SUBJECTS)
    documents = []
    for name in names:
        facts = [domain.fact.format(name=name, value=draw.int(domain.low, domain.high)) for domain in shelf.facts]
        fillers = [filler.format(name=name) for filler in draw.sample(_FILLERS, 2)]
        documents.append({"id": name.lower(), "title": name, "text": " ".join([fillers[0], *facts, fillers[1]])})
    documents += [dict(doc) for doc in draw.sample(corpus_documents(), _CORPUS_DOCUMENTS)]
    return draw.shuffled(documents), names


def _generator(shelves: list[Shelf], reference: Callable[[list[tuple[str, int]]], dict[str, Any]]):
    """Inputs (a collection id and the subjects asked, per shelf), the reference made of
    the stated facts in order (:func:`_stated`), and the held collections."""

    def generate(draw: Draw) -> tuple[dict[str, Any], ...]:
        inputs: dict[str, Any] = {}
        holdings: dict[str, Any] = {}
        for shelf in shelves:
            documents, names = _documents(shelf, draw)
            held = held_id(draw, "c")
            inputs[shelf.collection], inputs[shelf.names] = held, draw.sample(names, shelf.asked)
            holdings[held] = documents
        return inputs, reference(_stated(shelves, inputs, holdings)), holdings

    return generate


def _asked(shelves: list[Shelf]) -> list[tuple[Shelf, int, Domain]]:
    """Every (shelf, subject index, fact) the answer states, in its order."""
    return [(shelf, i, domain) for shelf in shelves for i in range(shelf.asked) for domain in shelf.facts]


def _stated(shelves: list[Shelf], inputs: dict[str, Any], holdings: dict[str, Any]) -> list[tuple[str, int]]:
    """Each asked fact's sentence and figure, found in the held documents."""
    found = []
    for shelf, i, domain in _asked(shelves):
        text = " ".join(doc["text"] for doc in holdings[inputs[shelf.collection]])
        subject = inputs[shelf.names][i]
        pattern = re.escape(domain.fact).replace(re.escape("{name}"), re.escape(subject))
        match = re.search(pattern.replace(re.escape("{value}"), r"(-?\d+)"), text)
        if match is None:
            raise ValueError(f"no fact about {subject!r} in the instance's documents")
        found.append((match.group(0), int(match.group(1))))
    return found


def _of(shelves: list[Shelf]) -> Callable[[Instance], list[tuple[str, int]]]:
    return lambda instance: _stated(shelves, instance.inputs, instance.holdings)


def _searches(shelves: list[Shelf]) -> list:
    return [
        step(
            f"find_{n}",
            "search",
            query=f"{ref(INPUT, shelf.names, i)} {domain.query}",
            collection=ref(INPUT, shelf.collection),
            k=1,
        )
        for n, (shelf, i, domain) in enumerate(_asked(shelves))
    ]


def _inputs(shelves: list[Shelf]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for shelf in shelves:
        properties[shelf.collection] = collection_schema(
            f"documents that describe {shelf.collection} among other things"
        )
        properties[shelf.names] = {
            "type": "array",
            "items": {"type": "string"},
            "minItems": shelf.asked,
            "maxItems": shelf.asked,
        }
    return {"type": "object", "required": list(properties), "properties": properties}


def _form(domain: Domain) -> str:
    return "“" + domain.fact.format(name="<name>", value="<figure>") + "”"


def _held(shelves: list[Shelf]) -> str:
    return "; ".join(
        f"`{s.collection}` names a collection that describes {s.collection} among other things, "
        f"and `{s.names}` lists {s.asked} of them"
        for s in shelves
    )


def draw_rag(draw: Draw, index: int) -> Production:
    """One to three collections, one to three subjects asked of each, one or two facts of
    each subject: between two and six sentences, one search each, joined in order."""
    while True:
        facts = draw.int(1, 2)
        shelves = _shelves(draw, draw.int(1, _MAX_SHELVES), lambda: facts, lambda: draw.int(1, 3))  # noqa: B023  (called here, within the iteration)
        if 2 <= len(_asked(shelves)) <= _MAX_SEARCHES:
            break
    searches = _searches(shelves)
    slots = " ".join(f"{{s{n}}}" for n in range(len(searches)))
    answer = step(
        "answer",
        "text_transform",
        op="template",
        text=slots,
        values={f"s{n}": ref(s.id, "text") for n, s in enumerate(searches)},
    )
    asked = "; ".join(
        f"for each name in `{s.names}`, in order, " + " then ".join(_form(d) for d in s.facts) for s in shelves
    )
    description = (
        f"Held by retrieval subnets: {_held(shelves)}. Answer with the sentences that state these facts, "
        f"{asked}, separated by single spaces."
    )

    def reference(stated: list[tuple[str, int]]) -> dict[str, Any]:
        return {"reference_answer": " ".join(s for s, _ in stated), "key_facts": [str(v) for _, v in stated]}

    family = make_family(
        index,
        f"rag_{'_'.join(s.collection for s in shelves)}",
        "rag",
        description,
        _inputs(shelves),
        [*searches, answer],
        _generator(shelves, reference),
    )
    stated = _of(shelves)
    orders: dict[str, Callable[[list[str]], list[str]]] = {"reversed": lambda s: s[::-1], "by_name": sorted}
    for n in range(len(searches) - 1):

        def swap(s: list[str], n: int = n) -> list[str]:
            return [*s[:n], s[n + 1], s[n], *s[n + 2 :]]

        orders[f"swap {n}"] = swap
    neighbours = {
        "text": {
            name: (lambda i, order=order: " ".join(order([s for s, _ in stated(i)]))) for name, order in orders.items()
        }
    }
    return Production(family, neighbours)


def draw_lookup(draw: Draw, index: int) -> Production:
    """Two or three figures (a fact of a subject each) from one or two collections, and one
    or two formulas over them: search → extract per figure, a calculator per formula."""
    while True:
        shelves = _shelves(draw, draw.int(1, 2), lambda: 1, lambda: draw.int(1, 2))
        if 2 <= len(_asked(shelves)) <= 3:
            break
    figures = ["a", "b", "c"][: len(_asked(shelves))]
    shapes = draw_shapes(draw, figures, _LOOKUP_KEYS, draw.int(1, 2), ops="+-")
    steps = []
    for n, search in enumerate(_searches(shelves)):
        steps += [
            search,
            step(f"num_{n}", "text_transform", op="extract_regex", text=ref(search.id, "text"), pattern=_NUMBER),
        ]
    refs = {name: ref(f"num_{n}", "text") for n, name in enumerate(figures)}
    refs |= {key: ref(f"calc_{key}", "text") for key in shapes}
    steps += [
        step(f"calc_{key}", "calculator", expression=expression(shape).format(**refs)) for key, shape in shapes.items()
    ]
    report = "{{" + ", ".join(f'"{key}": {{{key}}}' for key in shapes) + "}}"
    steps.append(
        step(
            "report",
            "text_transform",
            op="template",
            text=report,
            values={key: ref(f"calc_{key}", "text") for key in shapes},
        )
    )
    order = ", ".join(
        f"`{s.names}` item {i + 1}'s figure ({_form(d)}) is `{name}`"
        for (s, i, d), name in zip(_asked(shelves), figures)
    )
    asked = "; ".join(wording(key, shape) for key, shape in shapes.items())
    description = f"Held by retrieval subnets: {_held(shelves)}. Of the figures, {order}. Report JSON with {asked}."
    stated = _of(shelves)

    def leaves(instance: Instance) -> dict[str, int]:
        return {name: figure for name, (_, figure) in zip(figures, stated(instance))}

    def reference(found: list[tuple[str, int]]) -> dict[str, Any]:
        return {"goal_checklist": _checklist(evaluate(shapes, {n: f for n, (_, f) in zip(figures, found)}))}

    family = make_family(
        index,
        f"agent_{'_'.join(s.collection for s in shelves)}",
        "agent",
        description,
        _inputs(shelves),
        steps,
        _generator(shelves, reference),
    )
    return Production(family, formula_neighbours(shapes, figures, leaves))
