"""``code`` families: a function whose spec has hidden parameters, tested on cases drawn
per instance.

The function's body is public (in the description, at every hint tier, and in the step
hints); the constants it depends on (a factor, a shift, a width...) are drawn per
instance and held as a one-row config table by data subnets, under the id the ``table``
input names: its columns are the constants' names, and the body uses them in upper case
(column ``lo`` is ``LO``). The plan reads the table with ``csv_to_json(table=...)`` on a
data subnet, writes the constants block and the body into a module on a text subnet,
checks that the module runs in ``python_exec`` and returns it as ``artifacts.code``. A
text or exec node handed the table's id sees the id, never the constants. The reference
is ``{"entry_point", "cases": [{"args", "kwargs", "expected"}]}``: the validator calls the
entry point on each case's arguments in the sandbox and compares the values it gets
back with ``expected`` outside it. Expected values come from the plain-Python model
below, never from the tools.

Two functions (``tax``, ``count_above``) use a constant the table does not hold: the
description says how it follows from two columns (``FREE`` is ``base`` times ``scale``).
The hints work it out with a ``calculator`` step; the family's own ``program`` (what the
tiers bench's oracle runs) writes the arithmetic into the module instead, two nodes in
all, which the reference planner's search does not find: room above the reference.

No case of an instance is one that a constant-free guess (the argument, 0, an empty
list...) answers right, so a module that ignores the constants passes none of them.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from protocol.dataref import INPUT, ref
from protocol.synapse import StepHint

from .family import Family
from .held import held_id, table_schema
from .profiles import make_family, step
from .seed import Draw

Params = dict[str, Any]

_CASES = 6
_GUESSES: tuple[Callable[[Any], Any], ...] = (
    lambda argument: argument,
    lambda argument: 0,
    lambda argument: None,
    lambda argument: [],
    lambda argument: "",
    len,
)
"""Answers a module gives without reading its constants: the argument, 0, nothing, an
empty list or text, the argument's length."""
_REDRAWS = 50
"""Draws of a call before one no guess answers is taken as it is (none has needed it)."""


@dataclass(frozen=True, slots=True)
class Spec:
    entry: str
    wording: str
    constants: dict[str, Callable[[Draw], Any]]  # input name -> how it is drawn
    body: str  # Python using the constants in upper case
    model: Callable[[Params, Any], Any]  # (constants, the one argument) -> expected value
    argument: Callable[[Draw, Params], Any]
    derived: dict[str, Derived] = field(default_factory=dict)
    """Constants the body uses that the config table does not hold: each is worked out
    from the table's columns, as the description says."""


@dataclass(frozen=True, slots=True)
class Derived:
    """A constant computed from config columns: ``a op b``."""

    a: str
    op: str  # "+" or "*"
    b: str

    def value(self, params: Params) -> int:
        return params[self.a] + params[self.b] if self.op == "+" else params[self.a] * params[self.b]

    def wording(self, name: str) -> str:
        said = "plus" if self.op == "+" else "times"
        return f"`{name}` is not in the table: it is the `{self.a}` column {said} the `{self.b}` column"


def _ints(draw: Draw, low: int, high: int, n_low: int = 1, n_high: int = 8) -> list[int]:
    return [draw.int(low, high) for _ in range(draw.int(n_low, n_high))]


def _word(draw: Draw) -> str:
    return "".join(draw.choice(string.ascii_lowercase) for _ in range(draw.int(3, 9)))


def _fizz(p: Params, n: int) -> list[Any]:
    out: list[Any] = []
    for i in range(1, n + 1):
        word = ("Fizz" if i % p["a"] == 0 else "") + ("Buzz" if i % p["b"] == 0 else "")
        out.append(word or i)
    return out


def _caesar(p: Params, text: str) -> str:
    return "".join(chr((ord(c) - 97 + p["shift"]) % 26 + 97) for c in text)


SPECS = (
    Spec(
        "scale_clip",
        "multiply each number by `k`, then clip it to [`lo`, `hi`]",
        {"k": lambda d: d.int(2, 9), "lo": lambda d: d.int(-50, -1), "hi": lambda d: d.int(10, 90)},
        "def scale_clip(xs):\n    return [min(max(x * K, LO), HI) for x in xs]\n",
        lambda p, xs: [min(max(x * p["k"], p["lo"]), p["hi"]) for x in xs],
        lambda d, p: _ints(d, -20, 20),
    ),
    Spec(
        "caesar",
        "shift every lower-case letter `shift` places forward in the alphabet",
        {"shift": lambda d: d.int(1, 25)},
        "def caesar(text):\n    return ''.join(chr((ord(c) - 97 + SHIFT) % 26 + 97) for c in text)\n",
        _caesar,
        lambda d, p: _word(d),
    ),
    Spec(
        "bucket",
        "round a whole number down to a multiple of `width`",
        {"width": lambda d: d.int(3, 50)},
        "def bucket(x):\n    return x // WIDTH * WIDTH\n",
        lambda p, x: x // p["width"] * p["width"],
        lambda d, p: d.int(-500, 500),
    ),
    Spec(
        "fizzbuzz",
        "list 1..n, with multiples of `a` as Fizz, of `b` as Buzz, of both as FizzBuzz",
        {"a": lambda d: d.int(2, 7), "b": lambda d: d.int(8, 13)},
        "def fizzbuzz(n):\n    out = []\n    for i in range(1, n + 1):\n"
        "        word = ('Fizz' if i % A == 0 else '') + ('Buzz' if i % B == 0 else '')\n"
        "        out.append(word or i)\n    return out\n",
        _fizz,
        lambda d, p: d.int(5, 30),
    ),
    Spec(
        "weighted_sum",
        "the sum of three numbers weighted by `w1`, `w2`, `w3`",
        {"w1": lambda d: d.int(-5, 9), "w2": lambda d: d.int(-5, 9), "w3": lambda d: d.int(-5, 9)},
        "def weighted_sum(xs):\n    return sum(w * x for w, x in zip((W1, W2, W3), xs))\n",
        lambda p, xs: p["w1"] * xs[0] + p["w2"] * xs[1] + p["w3"] * xs[2],
        lambda d, p: _ints(d, -30, 30, 3, 3),
    ),
    Spec(
        "rotate",
        "rotate a non-empty list left by `r` places",
        {"r": lambda d: d.int(1, 40)},
        "def rotate(xs):\n    k = R % len(xs)\n    return xs[k:] + xs[:k]\n",
        lambda p, xs: xs[p["r"] % len(xs) :] + xs[: p["r"] % len(xs)],
        lambda d, p: _ints(d, 0, 99),
    ),
    Spec(
        "tax",
        "tax in cents: `rate` percent of the amount (rounded down) when it exceeds `free`, else 0",
        {"rate": lambda d: d.int(5, 30), "base": lambda d: d.int(10, 100), "scale": lambda d: d.int(2, 10)},
        "def tax(amount):\n    return amount * RATE // 100 if amount > FREE else 0\n",
        lambda p, a: a * p["rate"] // 100 if a > p["free"] else 0,
        lambda d, p: d.int(0, 3000),
        {"free": Derived("base", "*", "scale")},
    ),
    Spec(
        "pad_id",
        "`prefix` followed by the number zero-padded to `width` digits",
        {
            "prefix": lambda d: "".join(d.choice(string.ascii_uppercase) for _ in range(3)),
            "width": lambda d: d.int(4, 8),
        },
        "def pad_id(n):\n    return PREFIX + str(n).zfill(WIDTH)\n",
        lambda p, n: p["prefix"] + str(n).zfill(p["width"]),
        lambda d, p: d.int(0, 99_999),
    ),
    Spec(
        "window_max",
        "the maximum of every window of `w` consecutive numbers, plus `lift`",
        {"w": lambda d: d.int(2, 4), "lift": lambda d: d.int(1, 99)},
        "def window_max(xs):\n    return [max(xs[i:i + W]) + LIFT for i in range(len(xs) - W + 1)]\n",
        lambda p, xs: [max(xs[i : i + p["w"]]) + p["lift"] for i in range(len(xs) - p["w"] + 1)],
        lambda d, p: _ints(d, -50, 50, p["w"], 9),
    ),
    Spec(
        "count_above",
        "how many numbers are greater than `limit`",
        {"low": lambda d: d.int(0, 50), "span": lambda d: d.int(0, 50)},
        "def count_above(xs):\n    return sum(1 for x in xs if x > LIMIT)\n",
        lambda p, xs: sum(1 for x in xs if x > p["limit"]),
        lambda d, p: _ints(d, 0, 120, 0, 10),
        {"limit": Derived("low", "+", "span")},
    ),
)


def _quoted(spec: Spec, name: str) -> bool:
    return isinstance(spec.constants[name](Draw(0)), str)


def _config_csv(params: Params) -> str:
    """The one-row config table: a column per constant (string constants hold no comma)."""
    return ",".join(params) + "\n" + ",".join(str(value) for value in params.values()) + "\n"


def _constant_lines(spec: Spec, value: Callable[[str], str]) -> list[str]:
    """``NAME = value(name)`` for each config column (quoted when the constant is text)."""
    return [
        f'{name.upper()} = "{value(name)}"' if _quoted(spec, name) else f"{name.upper()} = {value(name)}"
        for name in spec.constants
    ]


def _module_template(spec: Spec) -> str:
    """The module as a fenced block: the constants from the config row's ``{name}`` fields
    and each derived constant's ``{name}`` field, then ``{body}``."""
    lines = _constant_lines(spec, lambda name: f"{{{name}}}") + [
        f"{name.upper()} = {{{name}}}" for name in spec.derived
    ]
    return "```python\n" + "\n".join(lines) + "\n\n\n{body}```\n"


def _config(name: str) -> str:
    """The DataRef of config column ``name`` in the ``config`` step's records."""
    return ref("config", "artifacts", "metadata", "result", 0, name)


def _with_derived(spec: Spec, params: Params) -> Params:
    return {**params, **{name: rule.value(params) for name, rule in spec.derived.items()}}


def _inline_program(spec: Spec) -> tuple[StepHint, ...]:
    """The shortest program when constants are derived: the config read, then one
    ``extract_code_block`` whose module works the derived constants out itself
    (``FREE = BASE * SCALE``) instead of a calculator step per constant. The reference
    planner does not find it (its search reads constants, it does not derive them)."""
    lines = _constant_lines(spec, _config)
    lines += [f"{name.upper()} = {rule.a.upper()} {rule.op} {rule.b.upper()}" for name, rule in spec.derived.items()]
    module = "```python\n" + "\n".join(lines) + "\n\n\n" + spec.body + "```\n"
    return (
        step("config", "csv_to_json", table=ref(INPUT, "table"), numeric=True),
        step("code", "text_transform", op="extract_code_block", text=module, language="python"),
    )


def _guessed(argument: Any, expected: Any) -> bool:
    """Whether a constant-free guess (:data:`_GUESSES`) answers this call right."""
    for guess in _GUESSES:
        try:
            if guess(argument) == expected:
                return True
        except TypeError:  # len of a number
            continue
    return False


def _case(draw: Draw, spec: Spec, params: Params) -> tuple[Any, Any]:
    """One call and its answer, one no constant-free guess answers (drawn again, up to
    :data:`_REDRAWS` times): a module that ignores the constants (or looks up a public
    example's calls) passes none of a hidden instance."""
    for _ in range(_REDRAWS):
        argument = spec.argument(draw, params)
        expected = spec.model(params, argument)
        if not _guessed(argument, expected):
            break
    return argument, expected


def _family(index: int, spec: Spec) -> Family:
    def generate(draw: Draw) -> tuple[dict[str, Any], ...]:
        params = {name: drawn(draw) for name, drawn in spec.constants.items()}
        known = _with_derived(spec, params)
        cases = []
        for _ in range(_CASES):
            argument, expected = _case(draw, spec, known)
            cases.append({"args": [argument], "kwargs": {}, "expected": expected})
        held = held_id(draw, "t")
        return {"table": held}, {"entry_point": spec.entry, "cases": cases}, {held: _config_csv(params)}

    steps = [
        step("config", "csv_to_json", table=ref(INPUT, "table"), numeric=True),
        step("body", "text_transform", op="dedent", text=spec.body),
        *(
            step(f"derive_{name}", "calculator", expression=f"{_config(rule.a)} {rule.op} {_config(rule.b)}")
            for name, rule in spec.derived.items()
        ),
        step(
            "module",
            "text_transform",
            op="template",
            text=_module_template(spec),
            values={
                "body": ref("body", "text"),
                **{name: _config(name) for name in spec.constants},
                **{name: ref(f"derive_{name}", "text") for name in spec.derived},
            },
        ),
        step("code", "text_transform", op="extract_code_block", text=ref("module", "text"), language="python"),
        step("smoke", "python_exec", code=f"{ref('code', 'artifacts', 'code')}\nprint({spec.entry}.__name__)\n"),
        step(
            "final",
            "text_transform",
            op="extract_code_block",
            text=f"```python\n{ref('code', 'artifacts', 'code')}```\n# checked: {ref('smoke', 'text')}",
        ),
    ]
    columns = ",".join(spec.constants)
    schema = {
        "type": "object",
        "required": ["table"],
        "properties": {"table": table_schema(f"{columns}; one row: the constants")},
    }
    constants = ", ".join(f"`{name}` is `{name.upper()}`" for name in [*spec.constants, *spec.derived])
    derived = "".join(f" {rule.wording(name)}." for name, rule in spec.derived.items())
    description = (
        f"Write a Python function `{spec.entry}` that does this: {spec.wording}. Its constants are the one row of "
        f"the config table the input `table` names (held by data subnets; columns {columns}); the body names "
        f"each constant in UPPER_CASE ({constants}).{derived} The body:\n\n"
        f"```python\n{spec.body}```\n\nReturn the module (the constants, then the body) as artifacts.code."
    )
    program = _inline_program(spec) if spec.derived else ()
    return make_family(
        index, f"code_{spec.entry}", "code", description, schema, steps, generate, extra_latency=3.0, program=program
    )


def families(start: int) -> list[Family]:
    return [_family(start + i, spec) for i, spec in enumerate(SPECS)]
