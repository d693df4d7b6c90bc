"""Building a settings model from a file, dotted overrides and command-line flags.

One function, :func:`build_settings`, serves every process (miner today, validator
next). Layers, later ones winning:

1. the model's defaults;
2. a settings file (``--config FILE``): TOML when the name ends in ``.toml``, else JSON;
3. dotted overrides (``--set rate_limit.burst=200``): the value is read as JSON when
   it parses (``200``, ``false``, ``{"a": 1}``), else taken as a string
   (``--set host=0.0.0.0``);
4. the operator flags the command was given (those left unset are skipped), each by its
   field's dotted path (``planner.name``), as a value: never turned into text and back.

Anything wrong — an unreadable file, an override without ``=``, a field the model
does not have, a value it refuses — is one :class:`~neurons.files.InputError` line.
"""

from __future__ import annotations

import functools
import inspect
import json
import tomllib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar

from pydantic import BaseModel, ValidationError

from neurons.files import InputError, read_text
from protocol.errors import format_validation_error

__all__ = ["build_settings", "model_default", "parse_override", "read_settings_file", "with_setting_flags"]

M = TypeVar("M", bound=BaseModel)


def build_settings(
    model: type[M],
    *,
    config_file: Path | None = None,
    overrides: Iterable[str] = (),
    flags: Mapping[str, Any] | None = None,
) -> M:
    """``model`` validated from the layers above."""
    data = read_settings_file(config_file) if config_file is not None else {}
    for text in overrides:
        path, value = parse_override(text)
        _set_path(data, path, value, text)
    for key, value in (flags or {}).items():
        if value is not None:
            _set_path(data, key.split("."), value, key)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"settings: {format_validation_error(exc)}") from None


def read_settings_file(path: Path) -> dict[str, Any]:
    """The object in a TOML or JSON settings file."""
    text = read_text(path)
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        kind = "TOML" if path.suffix == ".toml" else "JSON"
        raise InputError(f"{path}: not valid {kind}: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: must hold an object of settings")
    return data


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"a.b=value"`` → ``(["a", "b"], value)``."""
    key, sep, raw = text.partition("=")
    path = key.strip().split(".")
    if not sep or not all(path):
        raise InputError(f"--set {text!r}: expected KEY=VALUE, e.g. rate_limit.burst=200")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    return path, value


def _set_path(data: dict[str, Any], path: list[str], value: Any, text: str) -> None:
    node = data
    for i, key in enumerate(path[:-1]):
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise InputError(f"--set {text!r}: {'.'.join(path[: i + 1])} is not a section")
        node = child
    node[path[-1]] = value


def model_default(model: type[BaseModel], field: str) -> Any:
    """The default ``model`` gives ``field`` (a factory called)."""
    return model.model_fields[field].get_default(call_default_factory=True)


def with_setting_flags(
    model: type[BaseModel], flags: Mapping[str, str]
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command one option per setting: ``flags`` maps a field of ``model`` to its
    option name (``{"query_timeout_s": "--query-timeout"}``).

    Each option is typed as its field and unset by default (so an option not given leaves
    the file and ``--set`` layers alone); its help is the field's docstring and the
    model's default, so neither is written twice. The command receives them as
    ``settings_flags``, a dict by field name, ready for :func:`build_settings`'s
    ``flags``.
    """

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != "settings_flags"]
        added = [_flag_parameter(model, field, option) for field, option in flags.items()]

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given = {field: kwargs.pop(field) for field in flags}
            return command(*args, settings_flags=given, **kwargs)

        wrapper.__signature__ = signature.replace(parameters=[*own, *added])  # type: ignore[attr-defined]
        wrapper.__annotations__ = {**getattr(command, "__annotations__", {}), **{p.name: p.annotation for p in added}}
        wrapper.__annotations__.pop("settings_flags", None)
        return wrapper

    return decorate


def _flag_parameter(model: type[BaseModel], field: str, option: str) -> inspect.Parameter:
    import typer  # the CLI's library; this module is imported by commands only

    info = model.model_fields[field]
    if not info.description:
        raise ValueError(f"{model.__name__}.{field} has no docstring to be its option's help")
    help_text = f"{info.description}  [default: {model_default(model, field)}]"
    annotation = Annotated[Optional[info.annotation], typer.Option(option, help=help_text)]  # type: ignore[name-defined]  # a type built at run time, for typer
    return inspect.Parameter(field, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)
