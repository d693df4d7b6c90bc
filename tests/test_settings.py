"""Settings from a file, dotted overrides and flags: one model, layered, one-line errors."""

from pathlib import Path

import pytest

from miner.config import MinerSettings
from neurons.files import InputError
from neurons.settings import build_settings, parse_override


def test_layers_apply_in_order_file_then_sets_then_flags(tmp_path: Path) -> None:
    config = tmp_path / "miner.toml"
    config.write_text('port = 9000\nstrategy = "naive"\n[rate_limit]\nburst = 7\nper_second = 3.0\n')
    settings = build_settings(
        MinerSettings,
        config_file=config,
        overrides=["rate_limit.burst=200", "port=9100", "host=0.0.0.0"],
        flags={"port": 9200, "strategy": None},
    )
    assert settings.port == 9200  # the flag wins over --set and the file
    assert settings.strategy == "naive"  # an unset flag leaves the file's value
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
