"""What every reference tool does at its edges: read params, build the output.

Params are checked by a small pydantic model per tool; a violation becomes a
:class:`ToolError` naming the offending field. Output is a :class:`NodeOutput`,
whose size limits turn oversize results into a clean ``ToolError`` rather than
a truncated answer.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from protocol.errors import format_validation_error
from protocol.limits import OUTPUT_METADATA_MAX_BYTES
from protocol.output import Artifacts, NodeOutput

from .base import ToolError

M = TypeVar("M", bound=BaseModel)


def parse_params(model: type[M], params: Any) -> M:
    """Validate ``params`` against ``model`` or raise ``ToolError("bad params: ...")``."""
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise ToolError(f"bad params: {format_validation_error(exc)}") from None


def make_output(text: str = "", *, code: str = "", metadata: dict[str, Any] | None = None) -> NodeOutput:
    """A validated :class:`NodeOutput`; oversize parts raise ``ToolError``, never truncate."""
    try:
        if not code and not metadata:  # the default Artifacts is valid: skip its validators
            return NodeOutput(text=text)
        return NodeOutput(text=text, artifacts=Artifacts(code=code, metadata=metadata or {}))
    except ValidationError as exc:
        raise ToolError(f"output rejected: {format_validation_error(exc)}") from None


def canonical_json(value: Any) -> str:
    """The one JSON spelling tools emit: sorted keys, no spaces, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def json_output(value: Any, **metadata: Any) -> NodeOutput:
    """Text = canonical JSON of ``value``; ``metadata["result"] = value`` when that fits.

    The result is left out of the metadata (and only the text carries it) when
    the metadata would pass its 16 KiB limit; the text itself must fit its own.
    """
    try:
        text = canonical_json(value)
    except (TypeError, ValueError) as exc:
        raise ToolError(f"result is not JSON-serialisable: {exc}") from None
    with_result = {**metadata, "result": value}
    size = len(canonical_json(with_result).encode("utf-8"))
    return make_output(text, metadata=with_result if size <= OUTPUT_METADATA_MAX_BYTES else metadata)


def load_json_param(value: Any, field: str) -> Any:
    """A JSON value given either as itself or as a string holding JSON."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError as exc:
        raise ToolError(f"bad params: {field}: not valid JSON ({exc})") from None
