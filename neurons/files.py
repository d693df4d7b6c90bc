"""Reading the files a user names, with one-line reasons when they cannot be used."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from protocol import strictjson

__all__ = ["InputError", "read_json", "read_text"]


class InputError(ValueError):
    """A file or value the user gave cannot be used; the message says which and why."""


def read_text(path: Path) -> str:
    """The UTF-8 text of ``path``."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None


def read_json(path: Path) -> Any:
    """The JSON value in ``path``: strict JSON (``NaN`` and ``Infinity`` are not numbers)."""
    text = read_text(path)
    try:
        return strictjson.loads(text)
    except ValueError as exc:
        raise InputError(f"{path}: not valid JSON: {_one_line(str(exc))}") from None


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 200 else text[:197] + "..."
