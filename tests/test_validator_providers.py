"""Tool providers of each partner subnet, read from that subnet's metagraph."""

from __future__ import annotations

import pytest

from protocol.metagraph import Axon, MetagraphSnapshot, Neuron
from validator.providers import MetagraphProviders, subnet_netuid


def _snapshot(netuid: int, *neurons: Neuron) -> MetagraphSnapshot:
    return MetagraphSnapshot(netuid, 10, neurons)


@pytest.mark.parametrize(("name", "netuid"), [("sn8", 8), ("sn0", 0), ("sn12345", 12345), ("sn", None), ("x8", None), ("sn8a", None)])
def test_subnet_names_map_to_netuids(name: str, netuid: int | None) -> None:
    assert subnet_netuid(name) == netuid


async def test_providers_are_the_serving_neurons_by_stake_and_survive_a_failed_read() -> None:
    graphs = {
        8: _snapshot(8, Neuron(0, "a", 5.0, axon=Axon("10.0.0.1", 1)), Neuron(1, "b", 50.0, axon=Axon("10.0.0.2", 2)),
                     Neuron(2, "c", 500.0), Neuron(3, "d", 50.0, axon=Axon("10.0.0.4", 4))),
        12: _snapshot(12),
    }
    reads = []

    async def read(netuid: int) -> MetagraphSnapshot:
        reads.append(netuid)
        if netuid not in graphs:
            raise ConnectionError("unreachable")
        return graphs[netuid]

    directory = MetagraphProviders(read)
    await directory.refresh(["sn8", "sn12", "sn8", "local-tools"])
    assert sorted(reads) == [8, 12]
    select = directory.selector(0)
    assert [p.hotkey for p in select("sn8")] == ["b", "d", "a"]  # no axon, no provider; ties by uid
    assert select("sn8")[0].url == "http://10.0.0.2:2"
    assert list(select("sn12")) == [] and list(select("sn99")) == []

    del graphs[8]
    await directory.refresh(["sn8"])
    assert [p.hotkey for p in directory.selector(0)("sn8")] == ["b", "d", "a"]  # last known kept
