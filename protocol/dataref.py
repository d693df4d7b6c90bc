"""DataRefs: ``${<node_id>.output.<field_path>}`` references between plan nodes, and
``${input.<field_path>}`` references to the task's external inputs.

Grammar (docs/dataref.md):

- ``node_id`` is a node id (:data:`protocol.plan.NODE_ID`); ``field_path`` is 1 to 32
  segments ``[A-Za-z0-9_-]{1,64}`` joined by ``.``. When resolving, a segment indexes a
  list if the current value is a list and the segment is a decimal integer; otherwise it
  is a dict key. A longer segment or path is a syntax error like any other, so no ref
  can ask for more work than these bounds allow.
- ``input`` is reserved: ``${input.<field_path>}`` reads the instance's input values
  (seed 002's ``PARENT["k"]``), which the validator binds at execution under the key
  :data:`INPUT` of the outputs mapping. No plan node may be called ``input``.
- :func:`ref` is the one place a ref's text is written; the parser reads exactly
  what it writes.
- ``$${`` is a literal ``${``; any other ``${`` that does not start a valid ref is a
  syntax error (:class:`DataRefError`).
- A string that is exactly one ref takes the referenced value with its JSON type;
  inside a longer string the value is interpolated (strings as is, everything else
  as compact JSON).

Resolution is one pass over the plan's own text: a template is compiled once from the
params and only its literal parts are ever scanned, so upstream output that happens to
contain ``${...}`` stays literal (no injection). Refs live in string values at any
depth of dicts and lists, never in dict keys.

Compiled params share every subtree that holds no ``${`` with the original params, and
params with no ``${`` at all resolve to the *same* dict object. Callers must treat
resolved params as read-only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from .plan import NODE_ID

__all__ = [
    "INPUT",
    "CompiledParams",
    "DataRef",
    "DataRefError",
    "MissingField",
    "ParamsTooDeep",
    "compile_params",
    "find_refs",
    "ref",
]

INPUT = "input"
"""The reserved source name of the task's external inputs."""

_FRAGMENT_MAX = 80

# One token: the escape ``$${``, or ``${`` with a well-formed ref body or without
# one (a syntax error). Leftmost match wins, so in ``$$${`` the first ``$`` is
# literal and ``$${`` is the escape. In a ref body, group 1 is ``input`` (an input
# ref), group 2 a node id (followed by ``.output``), group 3 the field path with its
# leading dot. ``input`` is never a node, so ``${input.output.x}`` reads input ``output.x``.
SEGMENT_MAX_CHARS = 64
PATH_MAX_SEGMENTS = 32
_SEGMENT = rf"[A-Za-z0-9_-]{{1,{SEGMENT_MAX_CHARS}}}"
_REF = rf"(?:(input)|({NODE_ID})\.output)((?:\.{_SEGMENT}){{1,{PATH_MAX_SEGMENTS}}})\}}"
_TOKEN = re.compile(r"\$\$\{|\$\{(?:" + _REF + ")?")
_WHOLE_REF = re.compile(r"\$\{" + _REF)


@dataclass(frozen=True, slots=True)
class DataRef:
    """One parsed reference; ``text`` is its source form, e.g. ``${a.output.text}``."""

    node_id: str
    path: tuple[str, ...]
    text: str

    @property
    def is_input(self) -> bool:
        """Whether this ref reads the task's inputs rather than a node's output."""
        return self.node_id == INPUT


def ref(source: str, *path: str | int) -> str:
    """The text of the ref to ``path`` in ``source``'s output, or in the inputs when
    ``source`` is :data:`INPUT`: ``ref("a", "text")`` is ``${a.output.text}``,
    ``ref(INPUT, "rows", 0)`` is ``${input.rows.0}``. Raises :class:`DataRefError`
    when the result would not parse back to the same ref."""
    segments = ".".join(str(segment) for segment in path)
    text = f"${{{source}.{segments}}}" if source == INPUT else f"${{{source}.output.{segments}}}"
    match = _WHOLE_REF.fullmatch(text)
    if match is None or _ref(match).node_id != source or _ref(match).path != tuple(str(s) for s in path):
        raise DataRefError(f"not a valid DataRef: {text[:_FRAGMENT_MAX]!r}")
    return text


class DataRefError(ValueError):
    """The params contain malformed DataRef syntax (or nest too deeply)."""


class ParamsTooDeep(DataRefError):
    """The params nest dicts/lists deeper than the allowed ``max_depth``."""


class MissingField(LookupError):
    """A ref's field path does not exist in the referenced node's output.

    ``str(e)`` is the ref's source text, which the executor reports as
    ``missing_field:<ref>``.
    """

    def __init__(self, ref: DataRef) -> None:
        super().__init__(ref.text)
        self.ref = ref


# A compiled template part: either a literal string or a ref with a precomputed path.
_Part = str | tuple[DataRef, tuple[tuple[str, int | None], ...]]
_Resolver = Callable[[Mapping[str, Any]], Any]


def _fragment(text: str, start: int) -> str:
    end = text.find("}", start)
    frag = text[start : end + 1] if end != -1 else text[start:]
    if len(frag) > _FRAGMENT_MAX:
        frag = frag[: _FRAGMENT_MAX - 3] + "..."
    return frag


def _parse_string(text: str) -> list[str | DataRef]:
    """Split a string into literal runs and refs, unescaping ``$${``."""
    parts: list[str | DataRef] = []
    literal: list[str] = []
    pos = 0
    for match in _TOKEN.finditer(text):
        start = match.start()
        literal.append(text[pos:start])
        pos = match.end()
        if match.group() == "$${":
            literal.append("${")
        elif match.group(3) is None:
            raise DataRefError(f"invalid DataRef syntax: {_fragment(text, start)!r}")
        else:
            _flush(literal, parts)
            parts.append(_ref(match))
    literal.append(text[pos:])
    _flush(literal, parts)
    return parts


def _ref(match: re.Match[str]) -> DataRef:
    return DataRef(match.group(1) or match.group(2), tuple(match.group(3)[1:].split(".")), match.group())


def _flush(literal: list[str], parts: list[str | DataRef]) -> None:
    run = "".join(literal)
    literal.clear()
    if run:
        parts.append(run)


def _lookup(outputs: Mapping[str, Any], ref: DataRef, steps: tuple[tuple[str, int | None], ...]) -> Any:
    try:
        value = outputs[ref.node_id]
    except (KeyError, TypeError):
        raise MissingField(ref) from None
    for key, index in steps:
        if index is not None and isinstance(value, list):
            if index >= len(value):
                raise MissingField(ref)
            value = value[index]
        elif isinstance(value, dict) and key in value:
            value = value[key]
        else:
            raise MissingField(ref)
    return value


def _steps(ref: DataRef) -> tuple[tuple[str, int | None], ...]:
    return tuple((seg, int(seg) if seg.isdecimal() else None) for seg in ref.path)


def _to_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def _compile_string(text: str, refs: list[DataRef]) -> tuple[Any, bool]:
    whole = _WHOLE_REF.fullmatch(text)
    if whole is not None:  # the common case, without the general tokenizer
        ref = _ref(whole)
        refs.append(ref)
        steps = _steps(ref)
        return (lambda outputs: _lookup(outputs, ref, steps)), True
    parts = _parse_string(text)
    found = [part for part in parts if isinstance(part, DataRef)]
    refs.extend(found)
    if not found:
        return "".join(part for part in parts if isinstance(part, str)), False
    compiled: list[_Part] = [p if isinstance(p, str) else (p, _steps(p)) for p in parts]

    def interpolate(outputs: Mapping[str, Any]) -> str:
        return "".join(p if isinstance(p, str) else _to_text(_lookup(outputs, p[0], p[1])) for p in compiled)

    return interpolate, True


def _compile(value: Any, depth: int, max_depth: int, refs: list[DataRef]) -> tuple[Any, bool]:
    """Compile one value found at nesting level ``depth`` (the params dict is 1).

    Returns ``(compiled, dynamic)``. When ``dynamic`` is true ``compiled`` is a
    resolver taking the outputs mapping; otherwise it is a constant: ``value``
    itself when it holds no ``${``, or an unescaped copy when it only holds ``$${``.
    """
    if isinstance(value, str):
        return (value, False) if "${" not in value else _compile_string(value, refs)
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return value, False
    if depth > max_depth:
        raise ParamsTooDeep(f"params nested deeper than {max_depth} levels")
    base = value
    dynamic: list[tuple[Any, _Resolver]] = []
    for key, child in items:
        if isinstance(child, str):  # inlined: most params are flat strings
            if "${" not in child:
                continue
            compiled, is_dynamic = _compile_string(child, refs)
        else:
            compiled, is_dynamic = _compile(child, depth + 1, max_depth, refs)
        if is_dynamic:
            dynamic.append((key, compiled))
        elif compiled is not child:
            if base is value:
                base = value.copy()
            base[key] = compiled
    if not dynamic:
        return base, False
    return _container_resolver(base, tuple(dynamic)), True


def _container_resolver(base: dict[Any, Any] | list[Any], dynamic: tuple[tuple[Any, _Resolver], ...]) -> _Resolver:
    def resolve(outputs: Mapping[str, Any]) -> Any:
        out = base.copy()
        for key, fn in dynamic:
            out[key] = fn(outputs)
        return out

    return resolve


def _compile_checked(value: Any, max_depth: int) -> tuple[list[DataRef], Any, bool]:
    refs: list[DataRef] = []
    try:
        compiled, dynamic = _compile(value, 1, max_depth, refs)
    except RecursionError:
        raise ParamsTooDeep("params nested too deeply to compile") from None
    return refs, compiled, dynamic


_Use = tuple[DataRef, tuple[tuple[str, int | None], ...], bool]
"""One occurrence of a ref in the params: the ref, its lookup steps, whether it is a whole value."""


class CompiledParams:
    """A node's params compiled once; :meth:`resolve` fills in the refs per run."""

    __slots__ = ("refs", "sources", "_value", "_dynamic", "_params", "_sizing")

    def __init__(self, refs: tuple[DataRef, ...], value: Any, dynamic: bool, params: Any = None) -> None:
        self.refs = refs
        self.sources = frozenset(ref.node_id for ref in refs if not ref.is_input)
        self._value = value
        self._dynamic = dynamic
        self._params = params
        self._sizing: tuple[int, tuple[_Use, ...]] | None = None

    def resolve(self, outputs: Mapping[str, Any]) -> dict[str, Any]:
        """Params with every ref replaced by its value in ``outputs``.

        ``outputs`` maps node id to that node's output in ``NodeOutput.as_dict()``
        form, and :data:`INPUT` to the instance's input values. Raises :class:`MissingField` for an absent node, a missing key, an
        out-of-range index or a path through a non-container.
        """
        if self._dynamic:
            return cast("dict[str, Any]", self._value(outputs))  # compiled from a dict: a resolver building one
        return cast("dict[str, Any]", self._value)  # not dynamic: the params dict itself

    def resolved_size(self, outputs: Mapping[str, Any], cache: dict[tuple[str, bool], int] | None = None) -> int:
        """Characters of the compact JSON :meth:`resolve` would give, computed without building it.

        The size is the params' own text plus, per ref occurrence, the JSON size of
        the referenced value (measured once per distinct ref, in ``cache`` when
        given: share one cache across the nodes of a run). Raises :class:`MissingField`
        like :meth:`resolve`.
        """
        if self._sizing is None:
            self._sizing = _sizing(self._params)
        base, uses = self._sizing
        cache = {} if cache is None else cache
        total = base
        for ref, steps, whole in uses:
            key = (ref.text, whole)
            size = cache.get(key)
            if size is None:
                value = _lookup(outputs, ref, steps)
                size = _json_len(value) if whole else _json_len(_to_text(value)) - 2
                cache[key] = size
            total += size
        return total


def _json_len(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str))


def _sizing(params: Any) -> tuple[int, tuple[_Use, ...]]:
    """The JSON size of ``params`` without its refs, and every ref occurrence in it."""
    uses: list[_Use] = []
    stack = [params]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str) and "${" in value:
            whole = _WHOLE_REF.fullmatch(value)
            if whole is not None:
                ref = _ref(whole)
                uses.append((ref, _steps(ref), True))
            else:
                uses += [(part, _steps(part), False) for part in _parse_string(value) if isinstance(part, DataRef)]
    removed = sum(len(ref.text) + (2 if whole else 0) for ref, _, whole in uses)
    return _json_len(params) - removed, tuple(uses)


def compile_params(params: dict[str, Any], *, max_depth: int = 16) -> CompiledParams:
    """Parse every DataRef in ``params`` once.

    Raises :class:`DataRefError` on malformed syntax and :class:`ParamsTooDeep`
    (a subclass) when dicts/lists nest more than ``max_depth`` levels, counting the
    params dict itself as level 1.
    """
    refs, compiled, dynamic = _compile_checked(params, max_depth)
    return CompiledParams(tuple(refs), compiled, dynamic, params)


def find_refs(value: Any, *, max_depth: int = 256) -> list[DataRef]:
    """Every DataRef in string values of ``value`` (any depth), in order of appearance."""
    return _compile_checked(value, max_depth)[0]
