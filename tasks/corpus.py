"""The shipped corpus (``tasks/corpus/*.txt``: a title line, then the body), as
documents a family can put into an instance."""

from __future__ import annotations

import functools
from importlib import resources

__all__ = ["corpus_documents"]


@functools.cache
def corpus_documents() -> tuple[dict[str, str], ...]:
    """Every shipped document as ``{"id", "title", "text"}``, by id."""
    folder = resources.files(__package__) / "corpus"
    documents = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".txt"):
            continue
        title, _, body = entry.read_text(encoding="utf-8").partition("\n")
        documents.append({"id": entry.name[: -len(".txt")], "title": title.strip(), "text": " ".join(body.split())})
    return tuple(documents)
