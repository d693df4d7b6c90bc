"""``NodeOutput.of``: output built in-process skips validation only where no rule can fail."""

import pytest
from pydantic import ValidationError

from protocol.limits import OUTPUT_CODE_MAX_BYTES, OUTPUT_TEXT_MAX_BYTES
from protocol.output import Artifacts, NodeOutput


def validated(text: str, code: str = "", metadata: dict | None = None) -> NodeOutput:
    if not code and not metadata:
        return NodeOutput(text=text)
    return NodeOutput(text=text, artifacts=Artifacts(code=code, metadata=metadata or {}))


@pytest.mark.parametrize(
    "text, code, metadata",
    [
        ("", "", None),
        ("n1", "", None),
        ("t", "x = 1", None),
        ("t", "", {"k": [1, 2]}),
        ("é" * (OUTPUT_TEXT_MAX_BYTES // 2), "", None),  # at the limit in bytes, measured
        ("x" * (OUTPUT_TEXT_MAX_BYTES // 4), "c" * (OUTPUT_CODE_MAX_BYTES // 4), None),  # cannot pass: not measured
    ],
)
def test_of_builds_the_model_that_validation_builds(text, code, metadata):
    built, expected = NodeOutput.of(text, code, metadata), validated(text, code, metadata)
    assert built == expected
    assert built.model_dump_json() == expected.model_dump_json()
    assert built.model_fields_set == expected.model_fields_set
    assert built.artifacts.model_fields_set == expected.artifacts.model_fields_set
    assert NodeOutput.model_validate(built.model_dump()) == built
    assert built.artifacts is not NodeOutput.of(text, code, metadata).artifacts  # nothing shared between outputs


@pytest.mark.parametrize(
    "text, code, metadata, part",
    [
        ("é" * (OUTPUT_TEXT_MAX_BYTES // 2 + 1), "", None, "text"),
        ("x" * (OUTPUT_TEXT_MAX_BYTES + 1), "", None, "text"),
        ("", "x" * (OUTPUT_CODE_MAX_BYTES + 1), None, "code"),
        ("", "", {"blob": "x" * OUTPUT_TEXT_MAX_BYTES}, "metadata"),
        ("", "", {"bad": object()}, "metadata"),
        (5, "", None, "text"),
    ],
)
def test_of_still_rejects_what_breaks_a_rule(text, code, metadata, part):
    with pytest.raises(ValidationError, match=part):
        NodeOutput.of(text, code, metadata)
