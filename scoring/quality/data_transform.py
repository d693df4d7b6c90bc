"""``data_transform``: the final output's text, parsed as JSON, must equal the expected output.

1.0 for an exact match after canonicalisation (keys sorted, ``1 == 1.0``), else
0.0. With an ``output_schema`` the value must first validate (Draft 2020-12); a
value that validates but differs from ``expected_output`` still scores 0.0, and the
details say so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from referencing.exceptions import Unresolvable

from . import jsonvalue
from .base import Quality, output_text

MAX_SCHEMA_ERRORS = 5


def score(reference: Mapping[str, Any], final_output: object) -> Quality:
    if "expected_output" not in reference:
        return Quality.zero("task has no expected_output")
    try:
        value = jsonvalue.parse(output_text(final_output))
    except jsonvalue.NotJSON as exc:
        return Quality.zero(f"final output text is not JSON: {exc}")
    details: dict[str, Any] = {}
    schema = reference.get("output_schema")
    if schema is not None:
        try:
            errors = _schema_errors(schema, value)
        except (SchemaError, Unresolvable) as exc:
            return Quality.zero(f"task output_schema is unusable: {exc}")
        details["schema_valid"] = not errors
        if errors:
            return Quality.zero("output does not match output_schema", **details, schema_errors=errors)
    try:
        expected = jsonvalue.canonical(reference["expected_output"])
    except jsonvalue.NotJSON as exc:
        return Quality.zero(f"task expected_output is unusable: {exc}", **details)
    match = jsonvalue.canonical(value) == expected
    details["exact_match"] = match
    if match:
        return Quality(1.0, details)
    valid = "schema-valid but " if schema is not None else ""
    return Quality.zero(f"{valid}differs from expected_output", **details)


def _schema_errors(schema: object, value: Any) -> list[str]:
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(f"schema must be an object or a boolean, not {type(schema).__name__}")
    Draft202012Validator.check_schema(schema)
    messages = sorted(
        f"{'/'.join(map(str, error.absolute_path)) or '<root>'}: {error.message}"
        for error in Draft202012Validator(schema).iter_errors(value)
    )
    return messages[:MAX_SCHEMA_ERRORS]
