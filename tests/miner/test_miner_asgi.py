"""miner.asgi: public paths skip every guard layer, decided in one place; one refusal body."""

from __future__ import annotations

import json

import httpx
from starlette.middleware import Middleware

from miner.asgi import Guarded, Receive, Scope, Send, send_error
from protocol.routes import PUBLIC_PATHS, error_body


class _Refuse:
    """A guard that refuses every request it sees and counts them."""

    seen: list[str] = []

    def __init__(self, app: object, *, reason: str) -> None:
        self.reason = reason

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        _Refuse.seen.append(scope["path"])
        await send_error(send, 403, self.reason, f"refused by {self.reason}", retry_after_s=1.5)


async def _app(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"served"})


async def _get(app: Guarded, path: str) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://miner") as client:
        return await client.get(path)


async def test_public_paths_reach_the_app_and_no_guard_sees_them() -> None:
    _Refuse.seen.clear()
    app = Guarded(_app, layers=[Middleware(_Refuse, reason="outer"), Middleware(_Refuse, reason="inner")])
    for path in sorted(PUBLIC_PATHS):
        assert (await _get(app, path)).text == "served"
    assert _Refuse.seen == []


async def test_other_paths_meet_the_guards_outermost_first() -> None:
    _Refuse.seen.clear()
    app = Guarded(_app, layers=[Middleware(_Refuse, reason="outer"), Middleware(_Refuse, reason="inner")])
    response = await _get(app, "/NodeSynapse")
    assert response.status_code == 403
    assert response.content == error_body("outer", "refused by outer", retry_after_s=1.5)
    assert json.loads(response.content) == {"error": "refused by outer", "reason": "outer", "retry_after_s": 1.5}
    assert _Refuse.seen == ["/NodeSynapse"]
