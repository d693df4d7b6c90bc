"""The versions a neuron reports, and what it says when the chain expects a newer one."""

from __future__ import annotations

import dataclasses
import logging

from protocol.synapse import SCORING_VERSION
from protocol.version import package_version, upgrade_needed, version_fields
from support.fakechain import FakeChain
from support.keys import MetagraphBuilder
from validator.chainview import ChainView
from validator.prometheus import ValidatorMetrics


def test_the_version_fields_name_the_package_and_the_scoring_version() -> None:
    from importlib.metadata import version

    assert package_version() == version("dagnet")
    assert version_fields() == f"version={version('dagnet')} scoring_version={SCORING_VERSION}"


def test_an_upgrade_is_needed_only_when_the_chain_expects_a_newer_key() -> None:
    assert upgrade_needed(0, 1) is None and upgrade_needed(1, 1) is None
    said = upgrade_needed(3, 1)
    assert said is not None and "expects weights_version 3" in said and "version_key 1" in said


async def test_the_validator_warns_once_per_change_and_exports_it(caplog) -> None:
    chain = FakeChain(hotkey="me", snapshot=MetagraphBuilder(netuid=1).build())
    metrics = ValidatorMetrics()
    view = ChainView(chain, metrics, version_key=1)
    with caplog.at_level(logging.INFO, logger="validator.chainview"):
        for weights_version in (1, 2, 2, 2, 3, 1):
            chain.hyper = dataclasses.replace(chain.hyper, weights_version=weights_version)
            await view.read_hyperparameters()
            if weights_version == 3:
                assert metrics.upgrade_needed._value.get() == 1 and "weights_version 3" in view.upgrade
    said = [r.getMessage() for r in caplog.records]
    assert [m.split(",")[0] for m in said if "expects" in m] == [
        "the chain expects weights_version 2",
        "the chain expects weights_version 3",
    ]
    assert any("current again" in m for m in said)
    assert view.upgrade is None and metrics.upgrade_needed._value.get() == 0
    assert metrics.chain_weights_version._value.get() == 1
