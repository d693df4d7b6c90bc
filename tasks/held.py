"""Held data as the families name it: ids drawn per instance and the inputs' schema for them.

An instance's documents or tables are not in its inputs: the inputs name them by an id
drawn with the instance (``c-`` a collection of documents, ``t-`` a CSV table), and the
generator returns the data as the instance's ``holdings``. Only ``search(collection=...)``
on a retrieval subnet and ``csv_to_json(table=...)`` on a data subnet read it
(``subnets/holdings.py``; docs/tasks.md, "Held data").
"""

from __future__ import annotations

from typing import Any

from .seed import Draw

__all__ = ["collection_schema", "held_id", "held_inputs", "table_schema"]

_HEX_DIGITS = 8


def held_id(draw: Draw, kind: str) -> str:
    """A fresh id for held data of ``kind`` (``"c"`` collection, ``"t"`` table)."""
    return f"{kind}-{draw.below(16**_HEX_DIGITS):0{_HEX_DIGITS}x}"


def collection_schema(what: str) -> dict[str, Any]:
    """The schema of an input naming a held document collection that holds ``what``."""
    return {
        "type": "string",
        "pattern": f"^c-[0-9a-f]{{{_HEX_DIGITS}}}$",
        "description": f"id of a document collection ({what}) that retrieval subnets hold: "
        "read it with search(query, collection=<id>, k)",
    }


def table_schema(header: str) -> dict[str, Any]:
    """The schema of an input naming a held CSV table with ``header``."""
    return {
        "type": "string",
        "pattern": f"^t-[0-9a-f]{{{_HEX_DIGITS}}}$",
        "description": f"id of a CSV table (header {header}) that data subnets hold: "
        "read it with csv_to_json(table=<id>, numeric=true)",
    }


def held_inputs(schema: dict[str, Any]) -> list[str]:
    """The inputs of ``schema`` that name held data (a collection or a table id), in order."""
    return [
        name
        for name, item in schema.get("properties", {}).items()
        if str(item.get("pattern", "")).startswith(("^c-", "^t-"))
    ]
