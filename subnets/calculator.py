"""``calculator``: safe arithmetic, plus the few English phrasings planners send.

Arithmetic is evaluated by walking the Python AST of the expression: numbers,
``+ - * / // % **``, unary signs, parentheses and the functions ``abs min max
round sqrt log``. Nothing else parses (no names, attributes, subscripts,
comparisons, strings), so nothing can be looked up or executed. Exponents and
magnitudes are bounded *before* they are computed.

English forms exist because task-list plans (docs/protocol.md) write
``"Calculate the difference between {{a.result}} and {{b.result}}"`` where each
operand is a whole sentence returned by search. Supported: "difference between
X and Y" (|X − Y|), "sum of X and Y", "product of X and Y", "X divided by Y",
"average of X, Y and Z". Each operand contributes ONE number:

* a number tied to age — right after "age"/"aged" (up to 20 non-digit characters
  between, as in "at the age of 69" or "age at death was 69") or followed by
  "years old" — wins; if several are, the last of them;
* otherwise the last number in the operand.

An operand may itself contain " and "; the split used is the first one that
leaves a number on both sides, preferring one where both sides hold an age.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from typing import Any, cast

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from ._common import make_output, parse_params
from .base import ToolContext, ToolError, ToolResult, ToolSpec

MAX_EXPRESSION_CHARS = 4096
MAX_MAGNITUDE = 1e100
MAX_EXPONENT = 1000
MAX_ROUND_DIGITS = 15

Number = int | float


class CalculatorParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # ``query`` is what a task-list ``{"dag": [...]}`` task carries.
    expression: str = Field(
        min_length=1, max_length=MAX_EXPRESSION_CHARS, validation_alias=AliasChoices("expression", "query")
    )


async def calculator(params: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """Evaluate ``expression``; text is the number, metadata ``{value, expression}``."""
    p = parse_params(CalculatorParams, params)
    normalized = normalize(p.expression)
    value = evaluate(normalized)
    return ToolResult(make_output(str(value), metadata={"value": value, "expression": normalized}))


def normalize(expression: str) -> str:
    """The arithmetic form of ``expression``: English phrasings rewritten, else as given."""
    for pattern, build in _PHRASES:
        match = pattern.search(expression)
        if match:
            return build(match.group("rest"))
    return expression.strip()


def evaluate(expression: str) -> Number:
    """Evaluate a bounded arithmetic expression; ``ToolError`` says what is refused."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"not an arithmetic expression: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise ToolError("expression is nested too deeply") from None
    try:
        value = _eval(tree.body)
    except RecursionError:
        raise ToolError("expression is nested too deeply") from None
    except (ZeroDivisionError, OverflowError, ValueError) as exc:
        raise ToolError(f"arithmetic error: {exc}") from None
    return _tidy(value)


# --- the evaluator ---------------------------------------------------------------


def _pow(base: Number, exponent: Number) -> Number:
    if abs(exponent) > MAX_EXPONENT:
        raise ToolError(f"exponent {exponent} is larger than {MAX_EXPONENT}")
    if abs(base) > 1 and exponent > 0 and exponent * math.log10(abs(base)) > math.log10(MAX_MAGNITUDE):
        raise ToolError(f"result of {base} ** {exponent} would exceed {MAX_MAGNITUDE:g}")
    result = base**exponent
    if isinstance(result, complex):
        raise ToolError("result is not a real number")
    return result


_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Number], Number]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def _round(value: Number, digits: Number = 0) -> Number:
    if not isinstance(digits, int) or abs(digits) > MAX_ROUND_DIGITS:
        raise ToolError(f"round() digits must be an integer within ±{MAX_ROUND_DIGITS}")
    return round(value, digits)


def _log(value: Number, base: Number = math.e) -> Number:
    if value <= 0 or base <= 0 or base == 1:
        raise ToolError("log() needs a positive value and a positive base other than 1")
    return math.log(value, base)


def _sqrt(value: Number) -> Number:
    if value < 0:
        raise ToolError("sqrt() of a negative number")
    return math.sqrt(value)


_FUNCTIONS: dict[str, tuple[Callable[..., Number], int, int]] = {
    # name: (function, min args, max args)
    "abs": (abs, 1, 1),
    "min": (min, 1, 64),
    "max": (max, 1, 64),
    "round": (_round, 1, 2),
    "sqrt": (_sqrt, 1, 1),
    "log": (_log, 1, 2),
}


def _eval(node: ast.AST) -> Number:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _bounded(cast(Number, node.value))  # the type() test above, which mypy does not narrow on
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _bounded(_BINARY[type(node.op)](_eval(node.left), _eval(node.right)))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.Call):
        return _bounded(_call(node))
    raise ToolError(f"not allowed in an expression: {_describe(node)}")


def _call(node: ast.Call) -> Number:
    name = node.func.id if isinstance(node.func, ast.Name) else None
    if name not in _FUNCTIONS or node.keywords:
        raise ToolError(f"not allowed in an expression: call of {ast.unparse(node.func)!r}")
    fn, least, most = _FUNCTIONS[name]
    if not least <= len(node.args) <= most:
        raise ToolError(f"{name}() takes {least}..{most} arguments, got {len(node.args)}")
    return fn(*(_eval(arg) for arg in node.args))


def _bounded(value: Number) -> Number:
    if isinstance(value, float) and not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
        raise ToolError(f"result exceeds the magnitude limit {MAX_MAGNITUDE:g}")
    return value


def _describe(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return f"name {node.id!r}"
    if isinstance(node, ast.Attribute):
        return f"attribute {node.attr!r}"
    if isinstance(node, ast.BinOp):
        return f"operator {type(node.op).__name__}"
    if isinstance(node, ast.Constant):
        return f"constant {node.value!r}"
    return type(node).__name__


def _tidy(value: Number) -> Number:
    """Floats are rounded to 12 significant digits, hiding binary noise such as
    0.30000000000000004; integral ones below 1e15 then become ints ("14", never "14.0")."""
    if isinstance(value, float):
        value = float(f"{value:.12g}")
        if value.is_integer() and abs(value) < 1e15:
            return int(value)
    return value


# --- English phrasings -----------------------------------------------------------

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:,\d{3})*(?:\.\d+)?")
_AGE_BEFORE = re.compile(r"\bage[d]?\b[^\d]{0,20}$", re.IGNORECASE)
_AGE_WINDOW = 40  # characters before a number searched for "age"; the pattern spans at most 24
_AGE_AFTER = re.compile(r"\s*years?\s+old\b", re.IGNORECASE)
_AND = re.compile(r"\s+and\s+", re.IGNORECASE)
_LIST_SEPARATOR = re.compile(r",\s+|;\s*|\s+and\s+", re.IGNORECASE)


def _numbers(text: str) -> list[tuple[str, bool]]:
    """Every number in ``text`` (as written, thousands commas removed) and whether it is an age."""
    found = []
    for match in _NUMBER.finditer(text):
        before = text[max(0, match.start() - _AGE_WINDOW) : match.start()]
        aged = bool(_AGE_BEFORE.search(before) or _AGE_AFTER.match(text, match.end()))
        found.append((match.group().replace(",", ""), aged))
    return found


def _operand(text: str) -> str:
    """The one number an operand stands for (see the module docstring for the rule)."""
    found = _numbers(text)
    if not found:
        raise ToolError(f"no number in operand {text.strip()[:80]!r}")
    ages = [number for number, aged in found if aged]
    return ages[-1] if ages else found[-1][0]


def _has_age(text: str) -> bool:
    return any(aged for _, aged in _numbers(text))


def _split_pair(rest: str) -> tuple[str, str]:
    """Split "X and Y" at the " and " that leaves a number on each side."""
    splits = [(rest[: m.start()], rest[m.end() :]) for m in _AND.finditer(rest)]
    splits = [(a, b) for a, b in splits if _NUMBER.search(a) and _NUMBER.search(b)]
    if not splits:
        raise ToolError("expected two operands with a number each, joined by 'and'")
    return next(((a, b) for a, b in splits if _has_age(a) and _has_age(b)), splits[0])


def _pair(template: str) -> Callable[[str], str]:
    def build(rest: str) -> str:
        a, b = _split_pair(rest)
        return template.format(a=_operand(a), b=_operand(b))

    return build


def _divided(rest: str) -> str:
    a, b = _DIVIDED_BY.split(rest, maxsplit=1)
    return f"{_operand(a)} / {_operand(b)}"


def _average(rest: str) -> str:
    values = [_operand(part) for part in _LIST_SEPARATOR.split(rest) if _NUMBER.search(part)]
    if not values:
        raise ToolError("average of what? no numbers found")
    return f"({' + '.join(values)}) / {len(values)}"


_DIVIDED_BY = re.compile(r"\s+divided\s+by\s+", re.IGNORECASE)
_PHRASES: list[tuple[re.Pattern[str], Callable[[str], str]]] = [
    (re.compile(r"\bdifference between\s+(?P<rest>.*)", re.IGNORECASE | re.DOTALL), _pair("abs({a} - {b})")),
    (re.compile(r"\bsum of\s+(?P<rest>.*)", re.IGNORECASE | re.DOTALL), _pair("{a} + {b}")),
    (re.compile(r"\bproduct of\s+(?P<rest>.*)", re.IGNORECASE | re.DOTALL), _pair("{a} * {b}")),
    (re.compile(r"\baverage of\s+(?P<rest>.*)", re.IGNORECASE | re.DOTALL), _average),
    (re.compile(r"(?P<rest>.*\sdivided\s+by\s.*)", re.IGNORECASE | re.DOTALL), _divided),
]


CALCULATOR = ToolSpec(
    name="calculator",
    fn=calculator,
    description="Evaluate arithmetic safely (+ - * / // % **, abs min max round sqrt log) or "
    "'difference between X and Y', 'sum of', 'product of', 'X divided by Y', 'average of'; "
    "operands may be sentences (the age, else the last number, is taken).",
    latency_s=0.001,
)
