"""Pydantic validation errors as one line a peer or a user can act on."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

__all__ = ["format_validation_error"]

_MAX_REPORTED = 5
_INPUT_MAX = 80


def format_validation_error(exc: ValidationError) -> str:
    """Pydantic errors as ``nodes.0.id: String should match pattern ...``, joined by ``; ``.

    At most five are listed, followed by a count of the rest.
    """
    errors = exc.errors(include_url=False, include_input=False)
    parts = [_format_one(error) for error in errors[:_MAX_REPORTED]]
    if len(errors) > _MAX_REPORTED:
        parts.append(f"and {len(errors) - _MAX_REPORTED} more errors")
    return "; ".join(parts)


def _format_one(error: Any) -> str:
    # A location can hold a key the peer chose (an unexpected field): bound it too.
    location = _bounded(".".join(str(part) for part in error["loc"]))
    message = error["msg"]
    if error["type"] == "value_error":  # our own validators' messages, without pydantic's prefix
        message = message.removeprefix("Value error, ")
    return f"{location}: {_bounded(message)}" if location else _bounded(message)


def _bounded(text: str) -> str:
    return text[: _INPUT_MAX * 2] + "..." if len(text) > _INPUT_MAX * 2 else text
