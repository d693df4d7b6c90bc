"""The blacklist layer: only registered validators with enough stake get through.

It reads the verified hotkey the auth layer left in ``scope[HOTKEY]`` (so it
sits inside that layer) and the current metagraph snapshot, and puts the
caller's stake in ``scope[STAKE]`` for the priority layer.
"""

from __future__ import annotations

from protocol.metagraph import MetagraphSnapshot, Neuron

from .asgi import HOTKEY, STAKE, ASGIApp, Receive, Scope, Send, send_error
from .metagraph import MetagraphSource
from .metrics import MinerMetrics


class BlacklistMiddleware:
    """503 while the metagraph is not synced; 403 for a caller that is not
    registered, has no validator permit (when required) or too little stake."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        metagraph: MetagraphSource,
        min_stake: float,
        require_validator_permit: bool,
        metrics: MinerMetrics,
    ) -> None:
        self.app = app
        self.metagraph = metagraph
        self.min_stake = min_stake
        self.require_validator_permit = require_validator_permit
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        snapshot = self.metagraph.snapshot()
        if snapshot is None:
            self.metrics.blacklisted("not_synced")
            await send_error(send, 503, "not_synced", "metagraph not yet synced")
            return
        hotkey = scope[HOTKEY]
        neuron = snapshot.by_hotkey(hotkey)
        refusal = self.refusal(snapshot, hotkey, neuron)
        if refusal is not None:
            reason, message = refusal
            self.metrics.blacklisted(reason)
            await send_error(send, 403, reason, message)
            return
        scope[STAKE] = neuron.stake
        await self.app(scope, receive, send)

    def refusal(
        self, snapshot: MetagraphSnapshot, hotkey: str, neuron: Neuron | None
    ) -> tuple[str, str] | None:
        """``(reason, message)`` when ``neuron`` may not call this miner, else ``None``."""
        if neuron is None:
            return "unregistered", f"hotkey {hotkey} is not registered on netuid {snapshot.netuid}"
        if self.require_validator_permit and not neuron.validator_permit:
            return "no_validator_permit", f"uid {neuron.uid} has no validator permit"
        if neuron.stake < self.min_stake:
            return (
                "stake_below_minimum",
                f"uid {neuron.uid} has stake {neuron.stake:g}, below the minimum {self.min_stake:g}",
            )
        return None
