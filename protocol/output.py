"""The node output schema every DAG node produces, with its size limits (docs/protocol.md).

Oversize or malformed output is rejected, never truncated: the caller turns the
``ValidationError`` into a failed attempt. Output that arrives from a peer is
validated in full; output built in-process (:meth:`NodeOutput.of`) is checked only
where it could break a rule.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .limits import OUTPUT_CODE_MAX_BYTES, OUTPUT_METADATA_MAX_BYTES, OUTPUT_TEXT_MAX_BYTES

_object_setattr = object.__setattr__


def _utf8_len(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))


# Lengths (in code points) that cannot pass the byte limits: a code point takes at most 4 bytes.
_TEXT_SURE, _CODE_SURE = OUTPUT_TEXT_MAX_BYTES // 4, OUTPUT_CODE_MAX_BYTES // 4


def _fits(value: str, limit: int) -> bool:
    """Whether ``value`` is within ``limit`` UTF-8 bytes; encoded only when its length
    leaves it in doubt (a code point takes at most 4 bytes)."""
    return len(value) * 4 <= limit or _utf8_len(value) <= limit


class Artifacts(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("code")
    @classmethod
    def _code_size(cls, value: str) -> str:
        if not _fits(value, OUTPUT_CODE_MAX_BYTES):
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
        if not _fits(value, OUTPUT_TEXT_MAX_BYTES):
            raise ValueError(f"text exceeds {OUTPUT_TEXT_MAX_BYTES} bytes")
        return value

    @classmethod
    def of(cls, text: str = "", code: str = "", metadata: dict[str, Any] | None = None) -> NodeOutput:
        """``NodeOutput(text=text, artifacts=Artifacts(code=code, metadata=metadata))`` for
        output built in-process. Validated in full when a rule could fail: metadata, a
        value that is not a plain ``str``, or one long enough that it might pass its byte
        limit; else no rule can fail, and the model is built as ``model_construct`` would
        build it, at a fraction of the cost."""
        if (
            metadata
            or type(text) is not str
            or type(code) is not str
            or len(text) > _TEXT_SURE
            or len(code) > _CODE_SURE
        ):
            if not code and not metadata:
                return cls(text=text)
            return cls(text=text, artifacts=Artifacts(code=code, metadata=metadata or {}))
        artifacts = _built(Artifacts, {"code": code, "metadata": {}}, {"code", "metadata"} if code else set())
        return _built(cls, {"text": text, "artifacts": artifacts}, {"text", "artifacts"} if code else {"text"})

    def as_dict(self) -> dict[str, Any]:
        """The plain-JSON form DataRefs are resolved against."""
        artifacts = self.artifacts
        return {"text": self.text, "artifacts": {"code": artifacts.code, "metadata": artifacts.metadata}}


# BaseModel's own slots, written through their descriptors: what object.__setattr__ ends
# up doing, without looking each one up on the model class first.
_set_fields_set, _set_extra, _set_private = (
    BaseModel.__dict__[name].__set__
    for name in ("__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__")
)


_Model = TypeVar("_Model", bound=BaseModel)


def _built(cls: type[_Model], values: dict[str, Any], fields_set: set[str]) -> _Model:
    """An instance of ``cls`` holding ``values`` unvalidated, as pydantic's ``model_construct``
    builds one (without its per-field walk, which costs more than validating)."""
    model = object.__new__(cls)  # what cls.__new__ is, without the lookup through the model class
    _object_setattr(model, "__dict__", values)
    _set_fields_set(model, fields_set)
    _set_extra(model, None)
    _set_private(model, None)
    return model
