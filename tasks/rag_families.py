"""``rag`` families: questions over a document collection held for the instance.

Each instance mixes a few documents of the shipped corpus with generated documents
about invented subjects whose key values (a population, a length, a year...) are drawn
per instance, so no public table holds the answer. The documents are held by retrieval
subnets under an id the inputs name (``collection``): the plan searches the collection
once per subject (``search(collection=...)``) and joins the sentences it finds on a
text subnet; the reference answer is those sentences, and its ``key_facts`` are the
drawn values, which the answer must carry (ROUGE-L alone would pay the right words with
the wrong numbers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from protocol.dataref import INPUT, ref

from .corpus import corpus_documents
from .family import Family
from .held import collection_schema, held_id
from .profiles import make_family, step
from .seed import Draw


@dataclass(frozen=True, slots=True)
class Domain:
    """Invented subjects of one kind and the sentence stating each one's key value."""

    name: str
    fact: str  # format with {name} and {value}
    query: str  # words a search for the fact uses after the subject's name
    low: int
    high: int


DOMAINS = (
    Domain("towns", "{name} has a population of {value} residents.", "population residents", 2_000, 900_000),
    Domain("rivers", "The {name} river is {value} kilometres long.", "river kilometres long", 40, 6_000),
    Domain("peaks", "Mount {name} rises {value} metres above sea level.", "mount metres sea level", 900, 8_800),
    Domain("firms", "{name} Corporation was founded in {value}.", "corporation founded", 1850, 2024),
    Domain("ships", "The ship {name} displaces {value} tonnes.", "ship displaces tonnes", 800, 120_000),
    Domain("comets", "Comet {name} returns every {value} years.", "comet returns years", 3, 400),
    Domain("bridges", "The {name} Bridge has a main span of {value} metres.", "bridge main span metres", 80, 2_000),
    Domain("libraries", "The {name} Library holds {value} books.", "library holds books", 5_000, 9_000_000),
    Domain("islands", "{name} Island covers {value} square kilometres.", "island covers square kilometres", 2, 90_000),
    Domain("composers", "The composer {name} was born in {value}.", "composer born", 1600, 1990),
)

_FILLERS = (
    "{name} appears in several regional records.",
    "Local historians have written about {name} for decades.",
    "Travellers often mention {name} in their letters.",
)
_SYLLABLES = (
    "va",
    "lor",
    "ten",
    "mi",
    "dra",
    "sol",
    "ke",
    "rin",
    "tho",
    "bel",
    "zan",
    "qui",
    "ro",
    "fen",
    "ula",
    "gar",
)
_SUBJECTS = 5
_CORPUS_DOCUMENTS = 3


def collection_inputs(what: str) -> dict[str, Any]:
    """The inputs' schema of a family asking about ``subjects`` in a held collection."""
    return {
        "type": "object",
        "required": ["subjects", "collection"],
        "properties": {
            "subjects": {"type": "array", "items": {"type": "string"}},
            "collection": collection_schema(f"documents that describe {what} among other things"),
        },
    }


def invented_names(draw: Draw, k: int) -> list[str]:
    """``k`` distinct invented proper names of three syllables."""
    names: list[str] = []
    while len(names) < k:
        name = "".join(draw.choice(_SYLLABLES) for _ in range(3)).capitalize()
        if name not in names:
            names.append(name)
    return names


def fact_documents(domain: Domain, draw: Draw) -> tuple[list[dict[str, str]], dict[str, tuple[str, int]]]:
    """Generated documents about invented subjects, mixed with shipped ones in drawn order,
    and each subject's fact sentence and value."""
    facts: dict[str, tuple[str, int]] = {}
    documents = []
    for name in invented_names(draw, _SUBJECTS):
        value = draw.int(domain.low, domain.high)
        sentence = domain.fact.format(name=name, value=value)
        facts[name] = (sentence, value)
        fillers = [filler.format(name=name) for filler in draw.sample(_FILLERS, 2)]
        documents.append({"id": name.lower(), "title": name, "text": " ".join([fillers[0], sentence, fillers[1]])})
    documents += [dict(doc) for doc in draw.sample(corpus_documents(), _CORPUS_DOCUMENTS)]
    return draw.shuffled(documents), facts


def _family(index: int, domain: Domain, asked: int) -> Family:
    def generate(draw: Draw) -> tuple[dict[str, Any], ...]:
        documents, facts = fact_documents(domain, draw)
        subjects = draw.sample(list(facts), asked)
        reference = {
            "reference_answer": " ".join(facts[s][0] for s in subjects),
            "key_facts": [str(facts[s][1]) for s in subjects],
        }
        held = held_id(draw, "c")
        return {"subjects": subjects, "collection": held}, reference, {held: documents}

    searches = [
        step(
            f"find_{i}",
            "search",
            query=f"{ref(INPUT, 'subjects', i)} {domain.query}",
            collection=ref(INPUT, "collection"),
            k=1,
        )
        for i in range(asked)
    ]
    fields = " ".join(f"{{s{i}}}" for i in range(asked))
    answer = step(
        "answer",
        "text_transform",
        op="template",
        text=fields,
        values={f"s{i}": ref(f"find_{i}", "text") for i in range(asked)},
    )
    description = (
        f"The collection the input `collection` names describes {domain.name} among other things. For each "
        f"name in `subjects`, "
        f"in order, find the sentence that states its key figure and answer with those sentences, "
        f"separated by single spaces."
    )
    inputs = collection_inputs(domain.name)
    return make_family(index, f"rag_{domain.name}", "rag", description, inputs, [*searches, answer], generate)


def families(start: int) -> list[Family]:
    """One family per domain, asking about two or three subjects."""
    return [_family(start + i, domain, 2 + i % 2) for i, domain in enumerate(DOMAINS)]
