"""Tool serving is opt-in per subnet and action; python_exec only under bwrap (docs/mining.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import sandbox.run
from miner.serving import EVERY_TOOL, ToolMenu
from miner.settings import MinerSettings
from neurons.cli import app
from sandbox.isolation import Isolation
from support.miner import running_miner

FALLBACK = Isolation("rlimits+netns", "unshare")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
STEAL = {"code": "import os\nprint(sorted(os.environ))\n"}


@pytest.fixture
def fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sandbox probe reports a fallback, as in the compose image (no user namespaces)."""
    monkeypatch.setattr(sandbox.run, "_detect", lambda: FALLBACK)


def _node(subnet: str = "sn1", action: str = "echo", params: dict | None = None) -> dict:
    return {"task_id": "t1", "node_id": "n1", "subnet": subnet, "action": action, "params": params or {"text": "hi"}}


async def test_a_miner_serves_no_tools_by_default(fallback: None) -> None:
    async with running_miner(settings=MinerSettings(port=0)) as miner:
        echo = await miner.post("/NodeSynapse", _node())
        code = await miner.post("/NodeSynapse", _node(action="python_exec", params=STEAL))
    for response, action in ((echo, "echo"), (code, "python_exec")):
        assert response.status_code == 404, response.text
        assert response.json() == {"error": f"this miner does not serve {action} on subnet sn1", "reason": "not_served"}


async def test_only_the_named_subnets_and_actions_are_served() -> None:
    settings = MinerSettings(port=0, serve={"sn1": ["echo"], "sn2": ["*"]})
    async with running_miner(settings=settings) as miner:
        served = [
            await miner.post("/NodeSynapse", _node(subnet, action))
            for subnet, action in (("sn1", "echo"), ("sn2", "echo"))
        ]
        refused = [
            await miner.post("/NodeSynapse", _node(subnet, action))
            for subnet, action in (("sn1", "text_transform"), ("sn3", "echo"))
        ]
    assert [r.status_code for r in served] == [200, 200]
    assert [r.json()["reason"] for r in refused] == ["not_served", "not_served"]


async def test_python_exec_is_refused_under_the_sandbox_fallback(fallback: None) -> None:
    async with running_miner(settings=MinerSettings(port=0, serve=EVERY_TOOL)) as miner:
        code = await miner.post("/NodeSynapse", _node(action="python_exec", params=STEAL))
        echo = await miner.post("/NodeSynapse", _node())
    assert code.status_code == 404 and "PATH" not in code.text
    assert code.json() == {
        "error": "this miner serves python_exec only under bwrap; its sandbox is rlimits+netns",
        "reason": "not_served",
    }
    assert echo.status_code == 200


def test_a_miner_told_to_serve_python_exec_without_bwrap_does_not_start(fallback: None) -> None:
    result = CliRunner().invoke(
        app,
        [
            "miner",
            "--dev-key",
            "//Bob",
            "--metagraph-file",
            str(EXAMPLES / "metagraph.json"),
            "--port",
            "0",
            "--set",
            'serve.sn1=["echo", "python_exec"]',
        ],
    )
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: serve.sn1 names python_exec"), result.stderr
    assert "the sandbox here is rlimits+netns" in lines[0]


def test_an_unknown_action_in_the_table_is_named() -> None:
    with pytest.raises(ValueError, match="serve.sn1: unknown action 'teleport'"):
        ToolMenu({"sn1": ["teleport"]}, ["echo"])


def test_the_serve_table_is_set_with_dotted_overrides() -> None:
    from neurons.settings import build_settings

    settings = build_settings(MinerSettings, overrides=['serve.sn1=["echo"]', f"serve.sn2={json.dumps(['*'])}"])
    assert settings.serve == {"sn1": ["echo"], "sn2": ["*"]}
