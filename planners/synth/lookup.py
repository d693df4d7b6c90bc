"""Retrieval: the sentences and numbers a ``search`` over a collection finds per subject.

A collection is a list of documents among the inputs, or the id of one held for the
example (read with ``search(collection=id)`` on a retrieval subnet). A subject is a
string input (or an item of a list of strings) that the collection mentions. The query
is the subject followed by the words its wanted sentences share in every example (the
sentences the answer quotes, or the sentences that state a number about the subject),
so the query is the same program on every instance; each query is checked with the
search tool itself on every example.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from protocol.dataref import INPUT, ref
from subnets.retrieval import tokenize

from .arith import Leaf
from .world import Fragment, Program, World, run_steps

__all__ = ["collections", "number_leaves", "sentence", "split_sentences", "subjects"]

_MAX_LIST_ITEMS = 8
_NUMBER = r"-?\d+(?:\.\d+)?"
_HAS_NUMBER = re.compile(r"\d")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def collections(world: World) -> list[tuple[str, str]]:
    """``(param, input ref)`` of every collection: ``documents`` inline, ``collection`` held."""
    if not world.offers("search") or not world.examples:
        return []
    found = []
    for name in world.examples[0].inputs:
        values = world.column([name])
        if values is None:
            continue
        if all(_documents(v) for v in values):
            found.append(("documents", ref(INPUT, name)))
        elif all(isinstance(v, str) and _documents(ex.holdings.get(v)) for v, ex in zip(values, world.examples)):
            found.append(("collection", ref(INPUT, name)))
    return found


def _documents(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(d, dict) and "text" in d for d in value)


def _texts(world: World, param: str, source: str) -> list[str]:
    """Each example's collection as one text (what a subject must be found in)."""
    name = source[len("${input.") : -1]
    out = []
    for example in world.examples:
        docs = example.inputs[name] if param == "documents" else example.holdings[example.inputs[name]]
        out.append(" ".join(f"{d.get('title', '')} {d['text']}" for d in docs))
    return out


def subjects(world: World, texts: list[str]) -> Iterator[tuple[str, tuple[str, ...]]]:
    """String inputs (or list items) that every example's collection mentions."""
    for name in world.examples[0].inputs:
        values = world.column([name])
        if values is None:
            continue
        if all(isinstance(v, list) and all(isinstance(x, str) for x in v) for v in values):
            for index in range(min(_MAX_LIST_ITEMS, min(len(v) for v in values))):
                column = tuple(v[index] for v in values)
                if all(item and item in text for item, text in zip(column, texts)):
                    yield ref(INPUT, name, index), column
        elif all(isinstance(v, str) and 0 < len(v) <= 128 and v in text for v, text in zip(values, texts)):
            yield ref(INPUT, name), values


def _query_words(sentences: list[str], subject_values: tuple[str, ...]) -> list[str]:
    """The words every sentence shares, without the subject's own words or numbers, in
    the first sentence's order."""
    own = {word for value in subject_values for word in tokenize(value)}
    common = set.intersection(*(set(tokenize(s)) for s in sentences)) - own
    words = [w for w in dict.fromkeys(tokenize(sentences[0])) if w in common and not _HAS_NUMBER.search(w)]
    return words


def _search(program: Program, param: str, source: str, subject: str, words: list[str]) -> str:
    query = " ".join([subject, *words])
    return program.add("search", {"query": query, param: source, "k": 1})


def sentence(world: World, program: Program, targets: tuple[str, ...]) -> Fragment | None:
    """A search whose best sentence is ``targets`` (one per example), or None."""
    for param, source in collections(world):
        texts = _texts(world, param, source)
        for subject, values in subjects(world, texts):
            if not all(value in target for value, target in zip(values, targets)):
                continue
            world.budget.check()
            step = _search(program, param, source, subject, _query_words(list(targets), values))
            outputs = run_steps(program.closure(step), world.examples)
            if all(out is not None and out["text"] == t for out, t in zip(outputs, targets)):
                return Fragment(targets, ref(step, "text"), ref(step, "text"), 1)
    return None


def number_leaves(world: World, program: Program) -> list[Leaf]:
    """For each subject, the first number of the sentence about it that states one."""
    if not world.offers("search", "text_transform"):
        return []
    leaves = []
    for param, source in collections(world):
        texts = _texts(world, param, source)
        for subject, values in subjects(world, texts):
            world.budget.check()
            stated = [_stating(text, value) for text, value in zip(texts, values)]
            if not all(stated):
                continue
            words = _query_words([s[0] for s in stated], values)
            find = _search(program, param, source, subject, words)
            number = program.add(
                "text_transform", {"op": "extract_regex", "text": ref(find, "text"), "pattern": _NUMBER}
            )
            outputs = run_steps(program.closure(number), world.examples)
            if all(out is not None for out in outputs):
                numbers = tuple(float(out["text"]) for out in outputs)  # type: ignore[index]
                leaves.append(Leaf(ref(number, "text"), numbers, 2))
    return leaves


def split_sentences(text: str) -> list[str]:
    """``text`` cut into sentences where the search tool cuts a document."""
    return _SENTENCE_END.split(text)


def _stating(text: str, subject: str) -> list[str]:
    """The sentences of ``text`` that name ``subject`` and hold a number."""
    return [s for s in split_sentences(" ".join(text.split())) if subject in s and _HAS_NUMBER.search(s)]
