"""The node output schema every DAG node produces, with its size limits (docs/protocol.md).

Oversize or malformed output is rejected, never truncated: the caller turns the
``ValidationError`` into a failed attempt.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .limits import OUTPUT_CODE_MAX_BYTES, OUTPUT_METADATA_MAX_BYTES, OUTPUT_TEXT_MAX_BYTES


def _utf8_len(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))


class Artifacts(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("code")
    @classmethod
    def _code_size(cls, value: str) -> str:
        if _utf8_len(value) > OUTPUT_CODE_MAX_BYTES:
            raise ValueError(f"artifacts.code exceeds {OUTPUT_CODE_MAX_BYTES} bytes")
        return value

    @field_validator("metadata")
    @classmethod
    def _metadata_size(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            encoded = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"artifacts.metadata is not JSON-serialisable: {exc}") from None
        if _utf8_len(encoded) > OUTPUT_METADATA_MAX_BYTES:
            raise ValueError(f"artifacts.metadata exceeds {OUTPUT_METADATA_MAX_BYTES} bytes as JSON")
        return value


class NodeOutput(BaseModel):
    """``{"text": str, "artifacts": {"code": str, "metadata": dict}}``."""

    model_config = ConfigDict(extra="forbid")

    text: str = ""
    artifacts: Artifacts = Field(default_factory=Artifacts)

    @field_validator("text")
    @classmethod
    def _text_size(cls, value: str) -> str:
        if _utf8_len(value) > OUTPUT_TEXT_MAX_BYTES:
            raise ValueError(f"text exceeds {OUTPUT_TEXT_MAX_BYTES} bytes")
        return value

    def as_dict(self) -> dict[str, Any]:
        """The plain-JSON form DataRefs are resolved against."""
        return {
            "text": self.text,
            "artifacts": {"code": self.artifacts.code, "metadata": self.artifacts.metadata},
        }
