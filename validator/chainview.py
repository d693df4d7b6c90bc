"""The chain as the validator's tasks see it: the head, the metagraph and the subnet's
hyperparameters, each read with its failure counted and the last good read kept.

Stepping and weights share one :class:`ChainView`: a metagraph the step read is the
one weights are set against. Nothing here raises for a chain that does not answer.
"""

from __future__ import annotations

import logging

from chain.base import Chain, Hyperparameters
from chain.network import ChainUnreachable, OutageWarner
from protocol.metagraph import MetagraphSnapshot
from protocol.version import upgrade_needed

from .lifecycle import InfrastructureFailure
from .prometheus import ValidatorMetrics

log = logging.getLogger(__name__)


class ChainView:
    def __init__(self, chain: Chain, metrics: ValidatorMetrics, *, version_key: int) -> None:
        self.chain = chain
        self.metrics = metrics
        self.version_key = version_key
        self.upgrade: str | None = None
        """Why this code is older than the chain expects (``None``: it is not), for ``/health``."""
        self.snapshot: MetagraphSnapshot | None = None
        """The last metagraph read, or ``None`` before the first read."""
        self.hyperparameters: Hyperparameters | None = None
        """The subnet's hyperparameters as last read, or ``None`` before the first read."""
        self._outage = OutageWarner(log)
        self._owner: str | None = None
        self._permit: bool | None = None
        """Whether the last metagraph gave this validator a permit (``None``: not read yet)."""
        self.chain_problem: str | None = None
        """The last failed metagraph read's error (``None`` once one succeeds), for ``/health``:
        it names the chain, and a subnet that does not exist on it."""

    async def head(self) -> int | None:
        """The chain head, or ``None`` when the chain does not answer."""
        try:
            block = await self.chain.block()
        except Exception as exc:
            self.error("block", exc)
            return None
        self._outage.recovered()
        return block

    async def sync(self, block: int) -> MetagraphSnapshot | None:
        """The metagraph at ``block``, or the last one read when the chain cannot answer."""
        try:
            self.snapshot = await self.chain.metagraph(block)
        except Exception as exc:
            self.chain_problem = str(exc)
            self.error("metagraph", exc)
            if self.snapshot is None:
                return None
            log.warning("using the metagraph of block %s", self.snapshot.block)
        else:
            self.chain_problem = None
            self.metrics.synced(self.snapshot)
            self._note_permit(self.snapshot)
        return self.snapshot

    def _note_permit(self, snapshot: MetagraphSnapshot) -> None:
        """Say once when this validator has no validator permit, and once when it gets one."""
        neuron = snapshot.by_hotkey(self.chain.hotkey)
        permit = neuron is not None and neuron.validator_permit
        if permit == self._permit:
            return
        self._permit = permit
        if permit:
            log.info("this validator has a validator permit on netuid %s now", snapshot.netuid)
        else:
            log.warning(
                "this validator has no validator permit on netuid %s yet: miners may refuse it "
                "(403 no_validator_permit), and such refusals are no score for them (docs/scoring.md)",
                snapshot.netuid,
            )

    async def read_hyperparameters(self) -> Hyperparameters | None:
        """The subnet's hyperparameters read now, or the last ones read when the chain cannot answer."""
        try:
            self.hyperparameters = await self.chain.hyperparameters()
        except Exception as exc:
            self.error("hyperparameters", exc)
        else:
            self.metrics.tempo.set(self.hyperparameters.tempo)
            self._note_version(self.hyperparameters.weights_version)
        return self.hyperparameters

    def _note_version(self, chain_weights_version: int) -> None:
        """Warn when the chain expects a newer ``version_key`` than this code's: it refuses
        this validator's weights until the operator upgrades. Said again whenever the
        chain's value changes, not at every read."""
        self.metrics.chain_weights_version.set(chain_weights_version)
        upgrade = upgrade_needed(chain_weights_version, self.version_key)
        self.metrics.upgrade_needed.set(upgrade is not None)
        if upgrade is not None and upgrade != self.upgrade:
            log.warning("%s", upgrade)
        elif upgrade is None and self.upgrade is not None:
            log.info("the chain's weights_version is %s: this code is current again", chain_weights_version)
        self.upgrade = upgrade

    async def owner_hotkey(self) -> str | None:
        """The subnet owner's hotkey read now, or the last one read when the chain cannot answer."""
        try:
            self._owner = await self.chain.owner_hotkey()
        except Exception as exc:
            self.error("owner_hotkey", exc)
        return self._owner

    async def tempo(self) -> int:
        """The subnet's tempo, read from the chain the first time."""
        hyper = self.hyperparameters or await self.read_hyperparameters()
        if hyper is None:
            raise InfrastructureFailure("chain", "the subnet's hyperparameters cannot be read")
        return hyper.tempo

    def error(self, call: str, exc: Exception) -> None:
        """Count a failed chain call; an unreachable chain is logged once a minute (it names
        the endpoint and the cause), anything else each time."""
        self.metrics.chain_errors.labels(call).inc()
        if isinstance(exc, ChainUnreachable):
            self._outage.failed(exc, f"the validator's {call} call")
        else:
            log.warning("chain %s failed: %s", call, exc)
