"""``search``: BM25 retrieval over the sentences of a small text corpus.

The corpus is the shipped one, or the ``documents`` given in the params (a task
instance's own collection: ``[{"id", "title", "text"}, ...]``), indexed per call. A
task's collection is held by id (``collection``): the validator running the task puts
its documents in ``documents`` (``subnets/holdings.py``); an id that reaches the tool
was not resolved, and the call fails saying so.

A corpus is a directory of ``*.txt`` documents: the first line is the title,
the rest is the body. The document id is the file name without ``.txt``. Each
sentence of a body is one retrievable unit, indexed together with its
document's title, so "He died at 69" in the document "Emperor Wu of Han" still
answers a query naming him.

Tokens are lower-cased words with English stop words dropped, plurals folded
("emperors" → "emperor") and a few irregular forms that questions and facts
phrase differently mapped to one word ("death", "died" → "die"). Scoring is Okapi BM25 (k1 = 1.5, b = 0.75).
Ties keep corpus order (documents by id, sentences in order), so results are
deterministic. A corpus is loaded once per directory and cached.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ._common import make_output, parse_params, unresolved_held
from .base import Tool, ToolContext, ToolError, ToolResult, ToolSpec

K1 = 1.5
B = 0.75
MAX_DOCUMENT_BYTES = 1024 * 1024
MAX_DOCUMENTS = 256

_STOP_WORDS = frozenset(
    "a an and are as at be by for from had has have he her his in is it its of on or she that the their "
    "there these they this to was were which who whom with what when where how did does do".split()
)
_LEMMAS = {"died": "die", "dies": "die", "dying": "die", "dead": "die", "death": "die", "born": "birth"}
_WORD = re.compile(r"[^\W_]+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def tokenize(text: str) -> list[str]:
    """Lower-cased words, stop words dropped, simple plurals and a few irregular forms folded."""
    return [_LEMMAS.get(word) or _singular(word) for word in _WORD.findall(text.lower()) if word not in _STOP_WORDS]


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


@dataclass(frozen=True, slots=True)
class Sentence:
    doc: str
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class Hit:
    sentence: Sentence
    score: float

    def as_dict(self) -> dict[str, Any]:
        s = self.sentence
        return {"doc": s.doc, "title": s.title, "sentence": s.text, "score": round(self.score, 4)}


class Corpus:
    """A BM25 index over sentences: postings of ``term → [(sentence, tf)]``."""

    def __init__(self, sentences: list[Sentence]) -> None:
        self.sentences = sentences
        self._lengths: list[int] = []
        self._postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for index, sentence in enumerate(sentences):
            counts = Counter(tokenize(f"{sentence.title} {sentence.text}"))
            self._lengths.append(sum(counts.values()))
            for term, tf in counts.items():
                self._postings[term].append((index, tf))
        self._avg_length = sum(self._lengths) / len(sentences) if sentences else 0.0

    def search(self, query: str, k: int) -> list[Hit]:
        """The ``k`` best sentences with a positive score, best first."""
        n = len(self.sentences)
        scores: dict[int, float] = defaultdict(float)
        for term in set(tokenize(query)):
            postings = self._postings.get(term, [])
            idf = math.log(1 + (n - len(postings) + 0.5) / (len(postings) + 0.5))
            for index, tf in postings:
                norm = K1 * (1 - B + B * self._lengths[index] / self._avg_length)
                scores[index] += idf * tf * (K1 + 1) / (tf + norm)
        ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
        return [Hit(self.sentences[index], score) for index, score in ranked[:k] if score > 0]


@functools.lru_cache(maxsize=8)
def load_corpus(directory: Path) -> Corpus:
    """Read and index every ``*.txt`` in ``directory`` (cached per resolved path)."""
    if not directory.is_dir():
        raise ToolError(f"corpus directory {str(directory)!r} does not exist")
    sentences = []
    for path in sorted(directory.glob("*.txt")):
        if path.stat().st_size > MAX_DOCUMENT_BYTES:
            continue  # not a corpus document; never worth indexing
        title, _, body = path.read_text(encoding="utf-8", errors="replace").partition("\n")
        sentences += _sentences(path.stem, title.strip(), body)
    if not sentences:
        raise ToolError(f"corpus directory {str(directory)!r} holds no documents")
    return Corpus(sentences)


def _sentences(doc: str, title: str, body: str) -> list[Sentence]:
    text = " ".join(body.split())
    return [Sentence(doc, title, s) for s in _SENTENCE_END.split(text) if s]


class Document(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=128)
    title: str = Field(default="", max_length=1024)
    text: str = Field(max_length=MAX_DOCUMENT_BYTES)


class SearchParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=1024)
    k: int = Field(default=3, ge=1, le=20)
    documents: list[Document] | None = Field(default=None, min_length=1, max_length=MAX_DOCUMENTS)
    collection: str | None = Field(default=None, max_length=128)
    """A held collection's id: only the validator running the task resolves it to ``documents``."""


def make_search(corpus_dir: Path) -> Tool:
    """The ``search`` tool over ``corpus_dir``; the corpus loads on first use."""
    directory = corpus_dir.resolve()

    async def search(params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        p = parse_params(SearchParams, params)
        if p.collection is not None:
            raise ToolError(unresolved_held("collection", p.collection))
        if not tokenize(p.query):
            raise ToolError("bad params: query: has no searchable words")
        corpus = load_corpus(directory) if p.documents is None else _given_corpus(p.documents)
        hits = corpus.search(p.query, p.k)
        if not hits:
            raise ToolError(f"search: nothing in the corpus matches {p.query[:80]!r}")
        return ToolResult(make_output(hits[0].sentence.text, metadata={"hits": [h.as_dict() for h in hits]}))

    return search


def _given_corpus(documents: list[Document]) -> Corpus:
    sentences = [s for doc in documents for s in _sentences(doc.id, doc.title, doc.text)]
    if not sentences:
        raise ToolError("search: the given documents hold no text")
    return Corpus(sentences)


def search_spec(corpus_dir: Path) -> ToolSpec:
    return ToolSpec(
        name="search",
        fn=make_search(corpus_dir),
        description="BM25 search over the sentences of the given documents, or of the shipped corpus "
        "(history, cities, science, programming); text is the best sentence, metadata.hits the top k.",
        latency_s=0.005,
    )
