"""Settings from a file, dotted overrides and flags: one model, layered, one-line errors."""

import json
from pathlib import Path

import pytest

from miner.settings import MinerSettings
from neurons.files import InputError
from neurons.settings import build_settings, parse_override


def test_layers_apply_in_order_file_then_sets_then_flags(tmp_path: Path) -> None:
    config = tmp_path / "miner.toml"
    config.write_text('port = 9000\n[planner]\nname = "naive"\n[rate_limit]\nburst = 7\nper_second = 3.0\n')
    settings = build_settings(
        MinerSettings,
        config_file=config,
        overrides=["rate_limit.burst=200", "port=9100", "host=0.0.0.0"],
        flags={"port": 9200, "planner.name": None},
    )
    assert settings.port == 9200  # the flag wins over --set and the file
    assert settings.planner.name == "naive"  # an unset flag leaves the file's value
    assert settings.rate_limit.burst == 200 and settings.rate_limit.per_second == 3.0  # merged, not replaced
    assert settings.host == "0.0.0.0"  # not JSON: taken as a string


def test_json_settings_file(tmp_path: Path) -> None:
    config = tmp_path / "miner.json"
    config.write_text('{"min_stake": 1000, "require_validator_permit": false}')
    settings = build_settings(MinerSettings, config_file=config)
    assert settings.min_stake == 1000.0 and settings.require_validator_permit is False


@pytest.mark.parametrize(
    ("text", "path", "value"),
    [
        ("a=1", ["a"], 1),
        ("a.b=false", ["a", "b"], False),
        ("a=x=y", ["a"], "x=y"),
        ('a={"k": [1]}', ["a"], {"k": [1]}),
        ("a=", ["a"], ""),
    ],
)
def test_parse_override(text: str, path: list[str], value: object) -> None:
    assert parse_override(text) == (path, value)


@pytest.mark.parametrize(
    ("overrides", "content", "needle"),
    [
        (["burst"], None, "expected KEY=VALUE"),
        ([".a=1"], None, "expected KEY=VALUE"),
        (["port=1", "port.x=2"], None, "port is not a section"),
        (["rate_limt.burst=2"], None, "rate_limt: Extra inputs are not permitted"),
        (["workers=0"], None, "workers: Input should be greater than or equal to 1"),
        ([], "port = ", "not valid TOML"),
        ([], "[1, 2]", "must hold an object"),
    ],
)
def test_bad_settings_are_one_line(tmp_path: Path, overrides: list[str], content: str | None, needle: str) -> None:
    config = None
    if content is not None:
        config = tmp_path / ("s.toml" if "=" in content else "s.json")
        config.write_text(content)
    with pytest.raises(InputError, match=needle) as caught:
        build_settings(MinerSettings, config_file=config, overrides=overrides)
    assert "\n" not in str(caught.value)


def test_missing_settings_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        build_settings(MinerSettings, config_file=tmp_path / "nope.toml")


# -- the validator's settings (validator/settings.py) ----------------------------------

from typer.testing import CliRunner  # noqa: E402

from neurons.cli import app  # noqa: E402
from neurons.commands.validator import providers_override  # noqa: E402
from validator.settings import DagnetAdapter, OpenAIAdapter, ValidatorSettings  # noqa: E402

PROVIDERS = [{"uid": 3, "hotkey": "5Provider", "url": "http://127.0.0.1:9"}]


def test_validator_settings_take_the_adapters_table_from_a_file_and_sets(tmp_path: Path) -> None:
    config = tmp_path / "validator.toml"
    config.write_text(
        "sample_size = 32\nport = 0\n"
        '[adapters.sn8]\nkind = "dagnet"\nnetuid = 8\n'
        '[adapters."*"]\nkind = "dagnet"\nproviders = [{uid = 1, hotkey = "5H", url = "http://h:1", coldkey = "5C"}]\n'
    )
    settings = build_settings(
        ValidatorSettings,
        config_file=config,
        overrides=[
            'adapters.sn21={"kind": "openai", "base_url": "http://127.0.0.1:8000/v1", "model": "m", "api_key_env": "K"}'
        ],
        flags={"sample_size": 8, "poll_s": None},
    )
    assert settings.sample_size == 8 and settings.port == 0 and settings.poll_s == 1.0
    assert settings.adapters["sn8"] == DagnetAdapter(kind="dagnet", netuid=8)
    assert settings.adapters["*"].providers[0].coldkey == "5C"
    assert isinstance(settings.adapters["sn21"], OpenAIAdapter)
    assert set(settings.dagnet_adapters()) == {"sn8", "*"} and set(settings.openai_adapters()) == {"sn21"}


def test_the_providers_flag_is_short_for_the_star_adapter(tmp_path: Path) -> None:
    file = tmp_path / "providers.json"
    file.write_text(json.dumps(PROVIDERS))
    config = tmp_path / "validator.json"
    config.write_text(
        json.dumps({"adapters": {"*": {"kind": "dagnet", "netuid": 4}, "sn8": {"kind": "dagnet", "netuid": 8}}})
    )
    settings = build_settings(ValidatorSettings, config_file=config, overrides=[providers_override(file)])
    assert settings.adapters["*"] == DagnetAdapter.model_validate({"kind": "dagnet", "providers": PROVIDERS})
    assert settings.adapters["sn8"].netuid == 8  # the other entries stay


def test_no_adapter_means_owned_execution() -> None:
    assert ValidatorSettings().adapters == {}


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (["sample_sise=3"], "sample_sise: Extra inputs are not permitted"),
        (['adapters.sn8={"kind": "dagnet"}'], "exactly one of providers (a list) or netuid"),
        (['adapters.sn8={"kind": "grpc"}'], "adapters.sn8"),
        (['adapters.eight={"kind": "dagnet", "netuid": 8}'], "'eight' is not a subnet"),
        (['adapters.*={"kind": "dagnet", "providers": [{"uid": 1, "hotkey": "h", "url": "ftp://x"}]}'], "url"),
    ],
)
def test_bad_validator_settings_are_one_line(overrides: list[str], needle: str) -> None:
    with pytest.raises(InputError) as caught:
        build_settings(ValidatorSettings, overrides=overrides)
    assert needle in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--set", "bogus=1"], "settings: bogus: Extra inputs are not permitted"),
        (["--config", "{config}"], "settings: sample_size: Input should be greater than or equal to 1"),
        (["--providers", "{missing}"], "no such file"),
        (["--providers", "{config}"], "not a providers list"),
    ],
)
def test_the_validator_command_says_what_is_wrong_with_its_settings_in_one_line(
    tmp_path: Path, args: list[str], needle: str
) -> None:
    config = tmp_path / "validator.json"
    config.write_text('{"sample_size": 0}')
    files = {"config": config, "missing": tmp_path / "nope.json"}
    result = CliRunner().invoke(app, ["validator", "--dev-key", "//Alice", *(a.format(**files) for a in args)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], result.stderr


def test_the_replay_reads_the_state_file_the_settings_name(tmp_path: Path) -> None:
    config = tmp_path / "validator.toml"
    config.write_text(f'state = "{tmp_path / "elsewhere.sqlite"}"\n')
    result = CliRunner().invoke(app, ["validator", "--config", str(config), "--replay", "1"])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: no state file {tmp_path / 'elsewhere.sqlite'}"


async def test_the_adapters_become_the_validators_provider_table_and_owned_runner(monkeypatch) -> None:
    from neurons.validator import owned_runners, provider_table
    from protocol.metagraph import Axon, MetagraphSnapshot, Neuron
    from validator.adapters import BySubnet

    settings = build_settings(
        ValidatorSettings,
        overrides=[
            'adapters.sn8={"kind": "dagnet", "netuid": 8}',
            'adapters.*={"kind": "dagnet", "providers": [{"uid": 1, "hotkey": "5H", "url": "http://h:1", "coldkey": "5C"}]}',
        ],
    )

    async def read(netuid: int) -> MetagraphSnapshot:
        return MetagraphSnapshot(netuid, 1, (Neuron(0, f"hk{netuid}", 1.0, axon=Axon("10.0.0.8", 8), coldkey="c8"),))

    table = provider_table(settings, read)
    await table.refresh(["sn8", "sn9"])
    assert [(p.peer.hotkey, p.coldkey) for p in table.providers("sn8", 0)] == [("hk8", "c8")]
    assert [(p.peer.hotkey, p.coldkey) for p in table.providers("sn9", 0)] == [("5H", "5C")]
    assert provider_table(ValidatorSettings(), read) is None

    llm = build_settings(
        ValidatorSettings,
        overrides=[
            'adapters.sn21={"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": "DAGNET_TEST_KEY"}',
        ],
    )
    monkeypatch.delenv("DAGNET_TEST_KEY", raising=False)
    with pytest.raises(ValueError, match="DAGNET_TEST_KEY"):
        owned_runners(llm)
    monkeypatch.setenv("DAGNET_TEST_KEY", "k")
    from neurons.localrun import family_task

    assert isinstance(owned_runners(llm)(family_task("dt_inventory", 1)), BySubnet)


# -- every validator default written once -----------------------------------------------------


def test_the_validator_command_shows_every_flag_with_the_models_default() -> None:
    """The command's options are built from the settings model: each shows the model's
    default, and a flag the model lacks cannot exist."""
    import re

    from typer.testing import CliRunner

    from neurons.cli import app
    from neurons.commands.validator import SETTING_FLAGS
    from validator.settings import setting_default

    shown = " ".join(CliRunner().invoke(app, ["validator", "--help"], terminal_width=400).stdout.split())
    for field, option in SETTING_FLAGS.items():
        found = re.search(re.escape(option) + r" <\w+> (.*?) \[default: ([^\]]+)\]", shown)
        assert found, f"{option} missing from the help"
        assert found.group(2) == str(setting_default(field)), option


def test_the_loop_client_and_executor_configs_default_to_the_settings() -> None:
    from engine.executor import ExecutorConfig
    from validator.client import ClientConfig
    from validator.loop import LoopConfig
    from validator.settings import setting_default

    loop, client, executor = LoopConfig(), ClientConfig(), ExecutorConfig()
    assert (loop.sample_size, loop.exec_concurrency, loop.poll_s, dict(loop.tier_shares)) == (
        setting_default("sample_size"),
        setting_default("exec_concurrency"),
        setting_default("poll_s"),
        setting_default("tier_shares"),
    )
    assert client.timeout_s == setting_default("query_timeout_s")
    assert (executor.max_frames, executor.max_frame_instances) == (
        setting_default("max_frames"),
        setting_default("max_frame_instances"),
    )


def test_a_flag_sets_a_nested_setting_as_a_value_and_wins_over_set() -> None:
    """`dagnet miner --planner NAME` is planner.name, passed as the value it is (not turned
    into a --set string and parsed back), and wins over --set as every flag does."""
    from miner.settings import MinerSettings

    built = build_settings(
        MinerSettings,
        overrides=['planner.name="naive"', 'planner.options={"a": 1}'],
        flags={"planner.name": '{"not": "json"}', "port": None},
    )
    assert built.planner.name == '{"not": "json"}' and built.planner.options == {"a": 1}
