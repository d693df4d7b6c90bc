"""protocol.errors: one line per pydantic failure, bounded whatever the peer sent."""

from __future__ import annotations

import pydantic
import pytest

from protocol.errors import format_validation_error
from protocol.synapse import NodeResponse


def _message(document: object) -> str:
    with pytest.raises(pydantic.ValidationError) as info:
        NodeResponse.model_validate(document)
    return format_validation_error(info.value)


def test_a_key_the_peer_chose_is_bounded_in_the_message() -> None:
    message = _message({"k" * 100_000: 1})
    assert len(message) < 300
    assert message.endswith("...: Extra inputs are not permitted")


def test_many_errors_are_listed_five_then_counted() -> None:
    message = _message({f"extra{i}": i for i in range(8)})
    assert message.count("Extra inputs are not permitted") == 5
    assert message.endswith("and 3 more errors")
    assert "\n" not in message
