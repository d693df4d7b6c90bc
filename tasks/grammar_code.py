"""The code productions of the family grammar: function bodies from a small grammar over
lists of whole numbers and over strings, with constants drawn per instance.

Over a list: ``reduce(map(x) for x in xs if filter(x))``, the map (``x * K + S``,
``x % M``, ``abs(x - C)``...), the filter (``x > T``, ``x % D == 0``...) and the reduce
(the list itself, its sum, its largest item, how many) each drawn. Over a string: a
transform (upper case, reversed, the first ``N`` letters, repeated ``N`` times) and a
decoration with a drawn string constant (prefix, suffix, both sides). The family is
built by the curated builder (``code_families._family``), so its constants are held the
way every code family holds them. Neighbours: every other choice at one slot that uses
the same constants, run on the same cases.

How the plan is put together is drawn too. The constants are split across one to three
one-row config tables, each named by an input and read by its own ``csv_to_json``; half
the descriptions say which table holds which constant, the other half leave it to be
found by reading them; every instance's tables put their columns in a drawn order. The
module is written in one of seven ways: one ``extract_code_block`` with the constants'
refs inline; a ``template`` with the body inline; a ``dedent`` of the body and a
``template``; a ``template`` of the constants block (or one per config table) and
another of the module, with the body inline or dedented. Half the families then run a
``python_exec`` smoke run and write the final module after it.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protocol.dataref import INPUT, ref

from .code_families import _CASES, Spec, _case, _config_csv, _ints, _quoted, _word
from .family import Family, Instance
from .grammar import Production, held_rows
from .held import held_id, table_schema
from .profiles import make_family, step
from .seed import Draw

__all__ = ["draw_code"]

Consts = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Piece:
    """One choice at a slot: its Python text, the constants it uses (name → range, or
    ``None`` for a string of three capitals), what it computes and how it is worded."""

    name: str
    text: str
    constants: dict[str, tuple[int, int] | None]
    fn: Callable[..., Any]
    words: str


_MAPS = (
    Piece("scaled", "x * K + S", {"k": (2, 9), "s": (-20, 20)}, lambda x, c: x * c["k"] + c["s"], "x × `k` + `s`"),
    Piece(
        "shifted", "(x + S) * K", {"k": (2, 9), "s": (-20, 20)}, lambda x, c: (x + c["s"]) * c["k"], "(x + `s`) × `k`"
    ),
    Piece("offset", "x * K - S", {"k": (2, 9), "s": (-20, 20)}, lambda x, c: x * c["k"] - c["s"], "x × `k` − `s`"),
    Piece("modulo", "x % M", {"m": (2, 9)}, lambda x, c: x % c["m"], "x modulo `m` (Python's %)"),
    Piece("distance", "abs(x - C)", {"c": (-10, 10)}, lambda x, c: abs(x - c["c"]), "|x − `c`|"),
    Piece("capped", "min(x, C)", {"c": (-10, 10)}, lambda x, c: min(x, c["c"]), "the smaller of x and `c`"),
    Piece("plain", "x", {}, lambda x, c: x, "x"),
)
_FILTERS = (
    Piece("all", "", {}, lambda x, c: True, ""),
    Piece("above", " if x > T", {"t": (-10, 10)}, lambda x, c: x > c["t"], "greater than `t`"),
    Piece("below", " if x < T", {"t": (-10, 10)}, lambda x, c: x < c["t"], "less than `t`"),
    Piece("multiple", " if x % D == 0", {"d": (2, 5)}, lambda x, c: x % c["d"] == 0, "divisible by `d`"),
    Piece("other", " if x % D != 0", {"d": (2, 5)}, lambda x, c: x % c["d"] != 0, "not divisible by `d`"),
)
_REDUCES = (
    Piece("list", "[{e} for x in xs{f}]", {}, list, "the list, in order, of {e} for every number x of the list{f}"),
    Piece("sum", "sum({e} for x in xs{f})", {}, sum, "the sum of {e} over every number x of the list{f}"),
    Piece(
        "max",
        "max(({e} for x in xs{f}), default=0)",
        {},
        lambda v: max(v, default=0),
        "the largest {e} over every number x of the list{f} (0 when there is none)",
    ),
    Piece("count", "sum(1 for x in xs{f})", {}, lambda v: len(list(v)), "how many numbers of the list are {w}"),
)
_TRANSFORMS = (
    Piece("upper", "text.upper()", {}, lambda t, c: t.upper(), "the text in upper case"),
    Piece("reversed", "text[::-1]", {}, lambda t, c: t[::-1], "the text reversed"),
    Piece("head", "text[:N]", {"n": (1, 5)}, lambda t, c: t[: c["n"]], "the first `n` letters of the text"),
    Piece("repeated", "text * N", {"n": (1, 5)}, lambda t, c: t * c["n"], "the text repeated `n` times"),
)
_DECORATIONS = (
    Piece("prefixed", "P + {t}", {"p": None}, lambda t, c: c["p"] + t, "`p` followed by {t}"),
    Piece("suffixed", "{t} + P", {"p": None}, lambda t, c: t + c["p"], "{t} followed by `p`"),
    Piece("wrapped", "P + {t} + P", {"p": None}, lambda t, c: c["p"] + t + c["p"], "{t} with `p` before and after it"),
)


def _drawer(bounds: tuple[int, int] | None) -> Callable[[Draw], Any]:
    if bounds is None:
        return lambda d: "".join(d.choice(string.ascii_uppercase) for _ in range(3))
    low, high = bounds
    return lambda d: d.int(low, high)


def _constants(*pieces: Piece) -> dict[str, Callable[[Draw], Any]]:
    return {name: _drawer(bounds) for piece in pieces for name, bounds in piece.constants.items()}


def _list_model(m: Piece, f: Piece, r: Piece) -> Callable[[Consts, list[int]], Any]:
    return lambda c, xs: r.fn(m.fn(x, c) for x in xs if f.fn(x, c))


def _list_spec(m: Piece, f: Piece, r: Piece) -> Spec:
    entry = f"{r.name}_{f.name}" if r.name == "count" else f"{r.name}_{m.name}_{f.name}"
    expression = r.text.format(e=m.text, f=f.text)
    wording = r.words.format(e=m.words, f=f" that is {f.words}" if f.words else "", w=f.words)
    return Spec(
        entry,
        wording,
        _constants(m, f),
        f"def {entry}(xs):\n    return {expression}\n",
        _list_model(m, f, r),
        lambda d, p: _ints(d, -20, 20, 0, 8),
    )


def _text_model(t: Piece, dec: Piece) -> Callable[[Consts, str], Any]:
    return lambda c, text: dec.fn(t.fn(text, c), c)


def _text_spec(t: Piece, dec: Piece) -> Spec:
    entry = f"{dec.name}_{t.name}"
    body = f"def {entry}(text):\n    return {dec.text.format(t=t.text)}\n"
    return Spec(
        entry, dec.words.format(t=t.words), _constants(t, dec), body, _text_model(t, dec), lambda d, p: _word(d)
    )


def _runs(model: Callable[[Consts, Any], Any]):
    """A neighbour: ``model`` on each case of the instance, with the instance's constants."""

    def answer(instance: Instance) -> Any:
        constants = _constants_of(instance)
        return [model(constants, case["args"][0]) for case in instance.reference["cases"]]

    return answer


def _constants_of(instance: Instance) -> Consts:
    """The constants of every held config table the inputs name, merged."""
    constants: Consts = {}
    for name, value in instance.inputs.items():
        if isinstance(value, str) and value in instance.holdings:
            constants |= held_rows(instance, name)[0]
    return constants


def _body_agrees(spec: Spec) -> Callable[[Instance], str | None]:
    """The body, run here with the instance's constants on its cases, returns what the
    model expects. The body is the grammar's own text, never a miner's."""

    def consistent(instance: Instance) -> str | None:
        constants = _constants_of(instance)
        namespace: dict[str, Any] = {}
        exec("".join(f"{k.upper()} = {v!r}\n" for k, v in constants.items()) + spec.body, namespace)  # noqa: S102
        for case in instance.reference["cases"]:
            got = namespace[spec.entry](*case["args"])
            if got != case["expected"]:
                return f"{spec.entry}{tuple(case['args'])} returns {got!r}, the model {case['expected']!r}"
        return None

    return consistent


def _fits(piece: Piece, drawn: set[str]) -> bool:
    return set(piece.constants) <= drawn


_CONFIGS = ("limits", "weights", "settings", "factors", "bounds", "profile", "tuning", "params")
_STYLES = ("direct", "template", "dedent", "staged", "staged_dedent", "per_table", "per_table_dedent")
_MAX_TABLES = 3


def _split(draw: Draw, names: list[str]) -> dict[str, list[str]]:
    """The constants spread over one to three config tables (each holds at least one)."""
    k = draw.int(1, min(_MAX_TABLES, len(names)))
    shuffled = draw.shuffled(names)
    cuts = sorted(draw.sample(range(1, len(names)), k - 1))
    groups = [shuffled[a:b] for a, b in zip([0, *cuts], [*cuts, len(names)])]
    return {table: sorted(group, key=names.index) for table, group in zip(draw.sample(_CONFIGS, k), groups)}


def _generator(spec: Spec, tables: dict[str, list[str]]):
    def generate(draw: Draw) -> tuple[dict[str, Any], ...]:
        params = {name: drawn(draw) for name, drawn in spec.constants.items()}
        cases = []
        for _ in range(_CASES):
            argument, expected = _case(draw, spec, params)
            cases.append({"args": [argument], "kwargs": {}, "expected": expected})
        held = {table: held_id(draw, "t") for table in tables}
        holdings = {
            held[table]: _config_csv({c: params[c] for c in draw.shuffled(columns)})  # columns in drawn order
            for table, columns in tables.items()
        }
        return dict(held), {"entry_point": spec.entry, "cases": cases}, holdings

    return generate


def _steps(spec: Spec, tables: dict[str, list[str]], style: str, smoke: bool) -> list:
    """The config reads, the module written in ``style``, and maybe a smoke run."""
    steps = [step(f"read_{table}", "csv_to_json", table=ref(INPUT, table), numeric=True) for table in tables]
    steps += _module_steps(spec, tables, style)
    if smoke:
        code = ref("code", "artifacts", "code")
        steps.append(step("smoke", "python_exec", code=f"{code}\nprint({spec.entry}.__name__)\n"))
        steps.append(
            step(
                "final",
                "text_transform",
                op="extract_code_block",
                text=f"```python\n{code}```\n# checked: {ref('smoke', 'text')}",
            )
        )
    return steps


def _lines(spec: Spec, names: list[str], value: Callable[[str], str]) -> str:
    """``NAME = value`` per constant (quoted when it is text)."""
    return "\n".join(f'{n.upper()} = "{value(n)}"' if _quoted(spec, n) else f"{n.upper()} = {value(n)}" for n in names)


def _field(name: str) -> str:
    return f"{{{name}}}"


def _module_steps(spec: Spec, tables: dict[str, list[str]], style: str) -> list:
    """The steps that write the module (the last is ``code``, its ``extract_code_block``)."""
    column = {
        name: ref(f"read_{table}", "artifacts", "metadata", "result", 0, name)
        for table, names in tables.items()
        for name in names
    }
    everything = list(spec.constants)
    if style == "direct":
        text = f"```python\n{_lines(spec, everything, column.__getitem__)}\n\n\n{spec.body}```\n"
        return [step("code", "text_transform", op="extract_code_block", text=text, language="python")]
    steps = []
    blocks = _blocks(spec, tables, style)
    for block, names in blocks.items():
        steps.append(
            step(
                block,
                "text_transform",
                op="template",
                text=_lines(spec, names, _field),
                values={n: column[n] for n in names},
            )
        )
    if blocks:
        head, values = "\n".join(map(_field, blocks)), {block: ref(block, "text") for block in blocks}
    else:
        head, values = _lines(spec, everything, _field), dict(column)
    body = spec.body.replace("{", "{{").replace("}", "}}")
    if style.endswith("dedent"):
        steps.append(step("body", "text_transform", op="dedent", text=spec.body))
        body, values = _field("body"), {**values, "body": ref("body", "text")}
    steps.append(
        step("module", "text_transform", op="template", text=f"```python\n{head}\n\n\n{body}```\n", values=values)
    )
    steps.append(step("code", "text_transform", op="extract_code_block", text=ref("module", "text"), language="python"))
    return steps


def _blocks(spec: Spec, tables: dict[str, list[str]], style: str) -> dict[str, list[str]]:
    """The constants blocks ``style`` writes before the module (block step → constants):
    none (the module template writes them), one, or one per config table."""
    if style.startswith("staged"):
        return {"constants": list(spec.constants)}
    if style.startswith("per_table"):
        return {f"constants_{table}": names for table, names in tables.items()}
    return {}


def _build(index: int, spec: Spec, tables: dict[str, list[str]], style: str, smoke: bool, named: bool) -> Family:
    upper = ", ".join(f"`{name}` is `{name.upper()}`" for name in spec.constants)
    if named:
        held = "; ".join(f"`{table}` (columns {', '.join(names)})" for table, names in tables.items())
    else:
        held = ", ".join(f"`{table}`" for table in tables) + " (which holds which is found by reading them)"
    description = (
        f"Write a Python function `{spec.entry}` that does this: {spec.wording}. Its constants are held by data "
        f"subnets in the one-row config tables the inputs name: {held}; the body names each constant in "
        f"UPPER_CASE ({upper}). The body:\n\n```python\n{spec.body}```\n\nReturn the module (the constants, "
        f"then the body) as artifacts.code."
    )
    header = (lambda names: f"{','.join(names)}; one row: constants") if named else (lambda names: "one row: constants")
    schema = {
        "type": "object",
        "required": list(tables),
        "properties": {table: table_schema(header(names)) for table, names in tables.items()},
    }
    return make_family(
        index,
        f"code_{spec.entry}",
        "code",
        description,
        schema,
        _steps(spec, tables, style, smoke),
        _generator(spec, tables),
        extra_latency=3.0,
    )


def draw_code(draw: Draw, index: int) -> Production:
    """A list function (two in three draws) or a string function; its constants split over
    config tables; the module written in a drawn style, maybe smoke-run."""
    if draw.below(3):
        r = draw.choice(_REDUCES)
        m = _MAPS[-1] if r.name == "count" else draw.choice(_MAPS)
        f = draw.choice(_FILTERS[1:] if m.name == "plain" else _FILTERS)  # every function has a constant
        spec, names = _list_spec(m, f, r), set(_constants(m, f))
        models: dict[str, Callable[[Consts, Any], Any]] = {
            f"{r2.name}/{m2.name}/{f2.name}": _list_model(m2, f2, r2)
            for r2 in _REDUCES
            for m2 in _MAPS
            for f2 in _FILTERS
            if [r2 is not r, m2 is not m, f2 is not f].count(True) == 1 and _fits(m2, names) and _fits(f2, names)
        }
    else:
        t, dec = draw.choice(_TRANSFORMS), draw.choice(_DECORATIONS)
        spec, names = _text_spec(t, dec), set(_constants(t, dec))
        models = {
            f"{t2.name}/{d2.name}": _text_model(t2, d2)
            for t2 in _TRANSFORMS
            for d2 in _DECORATIONS
            if (t2 is not t) != (d2 is not dec) and _fits(t2, names) and _fits(d2, names)
        }
    tables = _split(draw, list(spec.constants))
    family = _build(index, spec, tables, draw.choice(_STYLES), draw.below(2) == 0, draw.below(2) == 0)
    return Production(family, {"cases": {name: _runs(model) for name, model in models.items()}}, _body_agrees(spec))
