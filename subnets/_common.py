"""What every reference tool does at its edges: read params, build the output.

Params are checked by a small pydantic model per tool; a violation becomes a
:class:`ToolError` naming the offending field. Output is a :class:`NodeOutput`,
whose size limits turn oversize results into a clean ``ToolError`` rather than
a truncated answer.

A tool never builds an output it already knows cannot fit: it measures first
(:func:`ensure_fits`), or writes through a meter that stops at the limit
(:func:`bounded_json`, :class:`BoundedText`), so a small request can never make
the miner allocate much more than the output limit.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from protocol.errors import format_validation_error
from protocol.limits import OUTPUT_METADATA_MAX_BYTES, OUTPUT_TEXT_MAX_BYTES
from protocol.output import NodeOutput

from .base import ToolError

M = TypeVar("M", bound=BaseModel)


def parse_params(model: type[M], params: Any) -> M:
    """Validate ``params`` against ``model`` or raise ``ToolError("bad params: ...")``."""
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise ToolError(f"bad params: {format_validation_error(exc)}") from None


def unresolved_held(param: str, held_id: str) -> str:
    """Why a call naming held data by id reached a tool: only the validator running the
    task holds it (``subnets/holdings.py``)."""
    return f"{param} {held_id[:80]!r} is held data: only the validator running its task resolves it"


def make_output(text: str = "", *, code: str = "", metadata: dict[str, Any] | None = None) -> NodeOutput:
    """A validated :class:`NodeOutput`; oversize parts raise ``ToolError``, never truncate."""
    try:
        return NodeOutput.of(text, code, metadata)
    except ValidationError as exc:
        raise ToolError(f"output rejected: {format_validation_error(exc)}") from None


_JSON_OPTIONS: dict[str, Any] = {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": False, "allow_nan": False}
_ENCODER = json.JSONEncoder(**_JSON_OPTIONS)


class OutputTooLarge(ToolError):
    """The output would pass its limit; raised before it is built."""


def ensure_fits(chars: int, what: str, limit: int = OUTPUT_TEXT_MAX_BYTES) -> None:
    """Refuse an output of ``chars`` characters (a lower bound on its bytes) over ``limit`` bytes."""
    if chars > limit:
        raise OutputTooLarge(f"output too large: {what} would be {chars}+ characters, the limit is {limit} bytes")


def canonical_json(value: Any) -> str:
    """The one JSON spelling tools emit: sorted keys, no spaces, UTF-8 kept as is."""
    return json.dumps(value, **_JSON_OPTIONS)


def bounded_json(value: Any, limit: int = OUTPUT_TEXT_MAX_BYTES, what: str = "the JSON result") -> str:
    """:func:`canonical_json`, encoded piece by piece and abandoned past ``limit`` characters."""
    pieces: list[str] = []
    size = 0
    for piece in _ENCODER.iterencode(value):
        size += len(piece)
        ensure_fits(size, what, limit)
        pieces.append(piece)
    return "".join(pieces)


class BoundedText:
    """A text sink (``write``) that raises :class:`OutputTooLarge` past ``limit`` characters."""

    def __init__(self, what: str, limit: int = OUTPUT_TEXT_MAX_BYTES) -> None:
        self._parts: list[str] = []
        self._size = 0
        self._what = what
        self._limit = limit

    def write(self, text: str) -> int:
        self._size += len(text)
        ensure_fits(self._size, self._what, self._limit)
        self._parts.append(text)
        return len(text)

    def getvalue(self) -> str:
        return "".join(self._parts)


def json_output(value: Any, **metadata: Any) -> NodeOutput:
    """Text = canonical JSON of ``value``; ``metadata["result"] = value`` when that fits.

    The result is left out of the metadata (and only the text carries it) when
    the metadata would pass its 16 KiB limit; the text itself must fit its own.
    """
    try:
        text = bounded_json(value)
    except (TypeError, ValueError) as exc:
        raise ToolError(f"result is not JSON-serialisable: {exc}") from None
    with_result = {**metadata, "result": value}
    try:
        size = len(bounded_json(with_result, OUTPUT_METADATA_MAX_BYTES).encode("utf-8"))
    except OutputTooLarge:
        size = OUTPUT_METADATA_MAX_BYTES + 1
    return make_output(text, metadata=with_result if size <= OUTPUT_METADATA_MAX_BYTES else metadata)


def load_json_param(value: Any, field: str) -> Any:
    """A JSON value given either as itself or as a string holding JSON."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError as exc:
        raise ToolError(f"bad params: {field}: not valid JSON ({exc})") from None
