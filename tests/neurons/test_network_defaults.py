"""One rule for every command's --network, and each help text says what it does:

- commands that only read (chain status, subnet list) default to finney;
- neurons (miner, validator) need --network or BT_NETWORK (a miner may follow a
  --metagraph-file instead) and never pick a chain on their own;
- commands that move value (subnet create | register | stake) need the network named
  and, on finney or test, a yes at the prompt or --yes; dev networks need neither.
A validator whose chain cannot be reached, or has no such subnet, exits 2 naming it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from chain.network import NO_NETWORK
from neurons.cli import app
from neurons.commands.network import NO_METAGRAPH
from support.chain import without_backoff

READERS = (["chain", "status"], ["subnet", "list"])
PAYING = (["subnet", "create"], ["subnet", "register"], ["subnet", "stake", "1"])


class Opened(Exception):
    """The command opened a chain: the test stops it there."""


def _network_help(words: list[str]) -> str:
    command = typer.main.get_command(app)
    for word in [w for w in words if not w.isdigit()]:
        command = command.commands[word]  # type: ignore[attr-defined]
    (option,) = [p for p in command.params if "--network" in getattr(p, "opts", ())]
    return option.help or ""


def _default_in_help(words: list[str]) -> str:
    return re.search(r"\[default: ([^\]:]+)", _network_help(words)).group(1)


@pytest.fixture
def opened(monkeypatch) -> list:
    """The networks commands open a chain on; each open stops the command (:class:`Opened`)."""
    from chain.sdk import SdkChain

    networks = []

    def open_(network, wallet, netuid, **kwargs):
        networks.append(network)
        raise Opened

    monkeypatch.setattr(SdkChain, "open", staticmethod(open_))
    monkeypatch.delenv("BT_NETWORK", raising=False)
    return networks


def _run(args: list[str], **env: str):
    return CliRunner().invoke(app, args, env=env or None)


def _opened(result) -> bool:
    return isinstance(result.exception, Opened)


def _error_line(result) -> str:
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    return line


@pytest.mark.parametrize("words", READERS, ids=" ".join)
def test_a_reading_command_defaults_to_finney_as_its_help_says(words, opened) -> None:
    assert _default_in_help(words) == "finney"
    assert _opened(_run(words))
    assert [n.name for n in opened] == ["finney"]


@pytest.mark.parametrize("words", PAYING, ids=" ".join)
def test_a_command_that_moves_value_needs_the_network_named(words, opened) -> None:
    assert _default_in_help(words) == "none"
    assert _error_line(_run([*words, "--dev-key", "//Alice"])) == f"error: {NO_NETWORK}"
    assert opened == []


@pytest.mark.parametrize("network", ["finney", "test", "wss://entrypoint-finney.opentensor.ai:443"])
@pytest.mark.parametrize("words", PAYING, ids=" ".join)
def test_on_a_live_network_it_needs_a_yes(words, network, opened) -> None:
    assert "--yes" in _network_help(words)
    line = _error_line(_run([*words, "--dev-key", "//Alice", "--network", network]))
    assert line.startswith(f"error: {words[0]} {words[1]}") and "not confirmed" in line and "--yes" in line, line
    assert opened == []
    refused_by_env = _error_line(_run([*words, "--dev-key", "//Alice"], BT_NETWORK=network))
    assert "not confirmed" in refused_by_env and opened == []
    assert _opened(_run([*words, "--dev-key", "//Alice", "--network", network, "--yes"]))
    assert [n.name for n in opened] == [network]


@pytest.mark.parametrize("network", ["local", "ws://127.0.0.1:9944", "embedded:dev.sqlite"])
@pytest.mark.parametrize("words", PAYING, ids=" ".join)
def test_on_a_dev_network_it_needs_neither(words, network, opened) -> None:
    assert _opened(_run([*words, "--dev-key", "//Alice", "--network", network]))
    assert len(opened) == 1


def test_a_validator_needs_a_network_as_its_help_says(opened, monkeypatch, tmp_path: Path) -> None:
    import neurons.validator

    assert _network_help(["validator"]).endswith("[default: none: --network or BT_NETWORK is required]")
    args = ["validator", "--dev-key", "//Alice", "--state", str(tmp_path / "v.sqlite"), "--port", "0"]
    assert _error_line(_run(args)) == f"error: {NO_NETWORK}"
    started = []

    async def run_validator(config, reset=False):
        started.append(config.network)

    monkeypatch.setattr(neurons.validator, "run_validator", run_validator)
    assert _run(args, BT_NETWORK="embedded:x.sqlite").exit_code == 0
    assert _run([*args, "--network", "local"]).exit_code == 0
    assert started == ["embedded:x.sqlite", "local"] and opened == []


def test_a_miner_needs_a_network_or_a_metagraph_file_as_its_help_says(opened, monkeypatch, tmp_path: Path) -> None:
    import neurons.miner

    assert _network_help(["miner"]).endswith("[default: none: --network, BT_NETWORK or --metagraph-file is required]")
    args = ["miner", "--dev-key", "//Bob", "--port", "0"]
    assert _error_line(_run(args)) == f"error: {NO_METAGRAPH}"
    followed = []
    monkeypatch.setattr(neurons.miner, "serve_miner", lambda process: followed.append(process.network))
    assert _run(args, BT_NETWORK="embedded:x.sqlite").exit_code == 0
    assert followed == ["embedded:x.sqlite"]


def test_a_validator_whose_chain_cannot_be_reached_exits_2_naming_it(tmp_path: Path, monkeypatch) -> None:
    without_backoff(monkeypatch)  # the SDK's retries, at once
    args = ["validator", "--dev-key", "//Alice", "--state", str(tmp_path / "v.sqlite"), "--port", "0"]
    missing = tmp_path / "nothing.sqlite"
    line = _error_line(_run([*args, "--network", f"embedded:{missing}"]))
    assert line.startswith(f"error: read the metagraph: cannot reach the chain at embedded:{missing}: "), line
