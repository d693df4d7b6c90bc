"""``llm``: an OpenAI-compatible chat completion, tested against a fake server on a loopback port."""

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from subnets.base import ToolContext, ToolError
from subnets.llm import LLMConfig, make_llm
from support.peers import CLOSE, raw_peer, serve_asgi

CTX = ToolContext(task_id="t", node_id="ask", attempt=1, timeout_seconds=5.0)


def fake_openai(mode: str = "ok") -> tuple[FastAPI, list[dict]]:
    """A chat-completions endpoint that echoes the last message (or misbehaves per ``mode``)."""
    app, seen = FastAPI(), []

    @app.post("/v1/chat/completions")
    async def complete(request: Request):
        body = await request.json()
        seen.append({"body": body, "auth": request.headers.get("authorization")})
        if mode == "error":
            return JSONResponse({"error": "overloaded"}, status_code=503)
        if mode == "garbage":
            return PlainTextResponse("not json")
        if mode == "no_choices":
            return {"choices": []}
        content = f"{body['model']} says: {body['messages'][-1]['content'].upper()}"
        return {
            "choices": [{"message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4},
        }

    return app, seen


async def test_chat_completion_round_trip():
    app, seen = fake_openai()
    async with serve_asgi(app) as url:
        tool = make_llm(LLMConfig(base_url=f"{url}/v1/", model="tiny", api_key="k-123", cost_per_call=0.02))
        result = await tool({"prompt": "hello", "system": "be brief", "max_tokens": 7}, CTX)
    assert result.output.text == "tiny says: HELLO"
    assert result.output.artifacts.metadata == {"model": "tiny", "usage": {"prompt_tokens": 3, "completion_tokens": 4}}
    assert result.cost_tao == 0.02
    assert seen == [
        {
            "body": {
                "model": "tiny",
                "max_tokens": 7,
                "temperature": 0,
                "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}],
            },
            "auth": "Bearer k-123",
        }
    ]


async def test_no_api_key_sends_no_authorization_header():
    app, seen = fake_openai()
    async with serve_asgi(app) as url:
        await make_llm(LLMConfig(base_url=f"{url}/v1", model="m"))({"prompt": "x"}, CTX)
    assert seen[0]["auth"] is None
    assert [m["role"] for m in seen[0]["body"]["messages"]] == ["user"]


@pytest.mark.parametrize(
    "mode, message",
    [("error", "answered 503"), ("garbage", "invalid JSON"), ("no_choices", "no choices")],
)
async def test_endpoint_failures_are_clean_tool_errors(mode, message):
    app, _ = fake_openai(mode)
    async with serve_asgi(app) as url:
        with pytest.raises(ToolError, match=message):
            await make_llm(LLMConfig(base_url=f"{url}/v1", model="m"))({"prompt": "x"}, CTX)


async def test_connection_dropped_is_a_clean_tool_error():
    async with raw_peer(CLOSE) as peer:
        with pytest.raises(ToolError, match="request failed"):
            await make_llm(LLMConfig(base_url=peer.url, model="m"))({"prompt": "x"}, CTX)


@pytest.mark.parametrize(
    "params, field",
    [
        ({}, "prompt"),
        ({"prompt": ""}, "prompt"),
        ({"prompt": "x", "max_tokens": 0}, "max_tokens"),
        ({"prompt": "x", "max_tokens": 10_000}, "max_tokens"),
        ({"prompt": "x", "temp": 1}, "temp"),
    ],
)
async def test_bad_params_name_the_field_without_calling_the_endpoint(params, field):
    tool = make_llm(LLMConfig(base_url="http://127.0.0.1:9", model="m"))
    with pytest.raises(ToolError, match=field):
        await tool(params, CTX)
