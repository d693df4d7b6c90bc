"""``llm``: one chat completion from any OpenAI-compatible endpoint.

Off unless configured: :func:`subnets.registry.default_registry` registers it
only when given an :class:`LLMConfig`, and the config (URL, model, key) is passed
in by the process that reads settings — this module reads no environment.
Requests use temperature 0 so a deterministic server gives deterministic output.
The call is blocking, in a worker thread (:func:`~.base.run_in_thread`): so it is
safe on the validator's simulated loop too, which runs such calls inline and never
awaits network I/O (engine/simclock.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field

from ._common import make_output, parse_params
from .base import Tool, ToolContext, ToolError, ToolResult, ToolSpec, run_in_thread

MAX_PROMPT_CHARS = 64 * 1024


@dataclass(frozen=True, slots=True)
class LLMConfig:
    """Where the model lives and what a call costs.

    ``base_url`` is the API root that ``/chat/completions`` is appended to
    (e.g. ``http://127.0.0.1:8000/v1``).
    """

    base_url: str
    model: str
    api_key: str | None = None
    timeout_s: float = 30.0
    cost_per_call: float = 0.0
    max_tokens_cap: int = 4096


class LLMParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS)
    system: str | None = Field(default=None, max_length=MAX_PROMPT_CHARS)
    max_tokens: int = Field(default=512, ge=1)


def make_llm(config: LLMConfig) -> Tool:
    """The ``llm`` tool bound to ``config``."""
    url = config.base_url.rstrip("/") + "/chat/completions"
    headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}

    def llm(params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        p = parse_params(LLMParams, params)
        if p.max_tokens > config.max_tokens_cap:
            raise ToolError(f"bad params: max_tokens: at most {config.max_tokens_cap}")
        messages = ([{"role": "system", "content": p.system}] if p.system else []) + [
            {"role": "user", "content": p.prompt}
        ]
        body = {"model": config.model, "messages": messages, "max_tokens": p.max_tokens, "temperature": 0}
        reply = _post(url, body, headers, min(config.timeout_s, ctx.timeout_seconds))
        text, usage = _content(reply)
        return ToolResult(make_output(text, metadata={"model": config.model, "usage": usage}), config.cost_per_call)

    return run_in_thread(llm)


def _post(url: str, body: dict[str, Any], headers: dict[str, str], timeout_s: float) -> Any:
    try:
        with httpx.Client(timeout=timeout_s) as client:
            response = client.post(url, json=body, headers=headers)
    except httpx.TimeoutException:
        raise ToolError(f"llm: no answer within {timeout_s:g}s") from None
    except httpx.HTTPError as exc:
        raise ToolError(f"llm: request failed: {type(exc).__name__}: {exc}") from None
    if response.status_code != 200:
        raise ToolError(f"llm: endpoint answered {response.status_code}: {response.text[:200]}")
    try:
        return response.json()
    except ValueError:
        raise ToolError("llm: endpoint answered with invalid JSON") from None


def _content(reply: Any) -> tuple[str, dict[str, Any]]:
    """``choices[0].message.content`` and the ``usage`` object of a chat completion."""
    try:
        text = reply["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise ToolError("llm: response has no choices[0].message.content") from None
    if not isinstance(text, str):
        raise ToolError("llm: choices[0].message.content is not a string")
    usage = reply.get("usage")
    return text, usage if isinstance(usage, dict) else {}


def llm_spec(config: LLMConfig) -> ToolSpec:
    return ToolSpec(
        name="llm",
        fn=make_llm(config),
        description=f"Chat completion from model {config.model!r} (OpenAI-compatible endpoint); "
        "params prompt, system, max_tokens.",
        cost_tao=config.cost_per_call,
        latency_s=2.0,
    )
