"""The blacklist: only registered validators with enough stake get through.

:class:`Blacklist` is the policy: given a hotkey and the current metagraph
snapshot, whether (and why) to refuse it. :class:`BlacklistMiddleware` applies it
to the verified hotkey the auth layer left in ``scope[HOTKEY]`` (so it sits
inside that layer) and puts the caller's stake in ``scope[STAKE]`` for the
priority layer; :class:`~miner.auth.SignedHeadersGate` applies the same policy to
the hotkey a request merely claims, before its body is read.
"""

from __future__ import annotations

from protocol.metagraph import MetagraphSnapshot, Neuron

from .asgi import HOTKEY, STAKE, ASGIApp, Receive, Scope, Send, send_error
from .metagraph import MetagraphSource
from .prometheus import MinerMetrics
from .querylog import RefusalLog


class Blacklist:
    """Who may call this miner: registered, with a validator permit when required,
    and at least ``min_stake``."""

    def __init__(self, metagraph: MetagraphSource, *, min_stake: float, require_validator_permit: bool) -> None:
        self.metagraph = metagraph
        self.min_stake = min_stake
        self.require_validator_permit = require_validator_permit
        self._log = RefusalLog()

    def check(self, hotkey: str) -> tuple[int, str, str] | None:
        """``(status, reason, message)`` when ``hotkey`` is refused now (logged, see
        :class:`~miner.querylog.RefusalLog`), else ``None``."""
        refused = self._check(hotkey)
        if refused is not None:
            self._log.refused(hotkey, *refused)
        return refused

    def _check(self, hotkey: str) -> tuple[int, str, str] | None:
        snapshot = self.metagraph.snapshot()
        if snapshot is None:
            return 503, "not_synced", "metagraph not yet synced"
        refusal = self.refusal(snapshot, hotkey, snapshot.by_hotkey(hotkey))
        return None if refusal is None else (403, *refusal)

    def refusal(self, snapshot: MetagraphSnapshot, hotkey: str, neuron: Neuron | None) -> tuple[str, str] | None:
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
        self.blacklist = Blacklist(metagraph, min_stake=min_stake, require_validator_permit=require_validator_permit)
        self.metagraph = metagraph
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        hotkey = scope[HOTKEY]
        refused = self.blacklist.check(hotkey)
        if refused is not None:
            status, reason, message = refused
            self.metrics.blacklisted(reason)
            await send_error(send, status, reason, message)
            return
        # The snapshot may have changed since the check: a caller gone from it ranks last.
        snapshot = self.metagraph.snapshot()
        neuron = snapshot.by_hotkey(hotkey) if snapshot is not None else None
        scope[STAKE] = neuron.stake if neuron is not None else 0.0
        await self.app(scope, receive, send)
