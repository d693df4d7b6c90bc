"""A real validator process on a clock-driven fake chain: ``python validator_process.py SPEC.json``.

SPEC holds the state path, the miners' metagraph, the tool provider and the
chain's start time; the tasks are two cheap v2 families (``SOURCE``); the chain's head is ``100 + (now - start) / block_time``,
so a restarted process sees the same chain moving on. Everything else is
``neurons.validator.run_validator``, exactly as ``dagnet validator`` runs it.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/, for support.*
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository

from neurons.validator import ValidatorProcessConfig, run_validator  # noqa: E402
from protocol.metagraph import (  # noqa: E402
    Axon,
    MetagraphSnapshot,
    Neuron,
    Peer,
)
from support.fakechain import FakeChain  # noqa: E402
from support.tasks import SomeFamilies  # noqa: E402
from validator.providers import FixedProviders  # noqa: E402

SOURCE = SomeFamilies("dt_inventory", "rag_comets")
"""What the validator runs: hidden instances of two families that need no sandbox."""


class ClockChain(FakeChain):
    start: float = 0.0
    block_time: float = 1.0

    @property
    def head(self) -> int:  # type: ignore[override]
        return 100 + int((time.time() - self.start) / self.block_time)

    @head.setter
    def head(self, value: int) -> None:
        pass


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    neurons = tuple(
        Neuron(n["uid"], n["hotkey"], n["stake"], n["permit"], Axon(*n["axon"]) if n["axon"] else None)
        for n in spec["neurons"]
    )
    config = ValidatorProcessConfig(
        dev_key="//Alice",
        state=Path(spec["state"]),
        port=0,
        poll_s=0.05,
        query_timeout_s=5.0,
        log_level="info",
    )
    chain = ClockChain(hotkey=spec["hotkey"], snapshot=MetagraphSnapshot(7, 0, neurons))
    chain.start, chain.block_time = spec["start"], spec["block_time"]
    provider = Peer(**spec["provider"])
    asyncio.run(run_validator(config, chain=chain, providers=FixedProviders([provider]), source=SOURCE))


if __name__ == "__main__":
    import logging

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    main(sys.argv[1])
