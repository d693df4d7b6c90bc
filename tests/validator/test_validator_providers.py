"""Where external tool providers come from: an operator's list, a netuid's metagraph, the adapters table."""

from __future__ import annotations

from protocol.metagraph import Axon, MetagraphSnapshot, Neuron, Peer
from validator.providers import FixedProviders, MetagraphProviders, Provider, ProviderTable


def _snapshot(netuid: int, *neurons: Neuron) -> MetagraphSnapshot:
    return MetagraphSnapshot(netuid, 10, neurons)


async def test_metagraph_providers_are_the_serving_neurons_by_stake_and_survive_a_failed_read() -> None:
    graph = _snapshot(
        8,
        Neuron(0, "a", 5.0, axon=Axon("10.0.0.1", 1), coldkey="ca"),
        Neuron(1, "b", 50.0, axon=Axon("10.0.0.2", 2), coldkey="cb"),
        Neuron(2, "c", 500.0, coldkey="cc"),
        Neuron(3, "d", 50.0, axon=Axon("10.0.0.4", 4), coldkey="cd"),
    )
    reads: list[int] = []
    up = True

    async def read(netuid: int) -> MetagraphSnapshot:
        reads.append(netuid)
        if not up:
            raise ConnectionError("unreachable")
        return graph

    directory = MetagraphProviders(read, 8)
    assert list(directory.providers("sn3", 0)) == []  # nothing read yet
    await directory.refresh(["sn3", "sn5"])
    assert reads == [8]  # its netuid, once, whatever the subnets' names
    found = directory.providers("sn3", 0)
    assert [(p.peer.hotkey, p.coldkey) for p in found] == [("b", "cb"), ("d", "cd"), ("a", "ca")]  # no axon: none
    assert found[0].peer.url == "http://10.0.0.2:2"

    up = False
    await directory.refresh(["sn3"])
    assert [p.peer.hotkey for p in directory.providers("sn3", 0)] == ["b", "d", "a"]  # last known kept


def test_a_fixed_list_serves_every_subnet_rotated_by_offset() -> None:
    directory = FixedProviders([Peer(i, f"hk{i}", f"http://h{i}") for i in range(3)])
    assert directory.serves("sn1") and directory.serves("anything")
    assert [p.peer.uid for p in directory.providers("sn1", 4)] == [1, 2, 0]
    assert list(FixedProviders([]).providers("sn1", 3)) == []


async def test_the_table_gives_a_subnet_its_own_entry_else_the_star_and_refreshes_each_entry_once() -> None:
    refreshed: list[list[str]] = []

    class Recording(FixedProviders):
        async def refresh(self, subnets):
            refreshed.append(list(subnets))

    own = Recording([Provider(Peer(1, "own", "http://own"), "cold")])
    star = Recording([Peer(2, "star", "http://star")])
    table = ProviderTable({"sn8": own, "*": star})
    assert [p.peer.hotkey for p in table.providers("sn8", 0)] == ["own"]
    assert [p.peer.hotkey for p in table.providers("sn9", 0)] == ["star"]
    await table.refresh(["sn9", "sn8", "sn10", "sn9"])
    assert sorted(refreshed) == [["sn10", "sn9"], ["sn8"]]

    only = ProviderTable({"sn8": own})
    assert only.serves("sn8") and not only.serves("sn9")
    assert list(only.providers("sn9", 0)) == []
