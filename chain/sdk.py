"""The one :class:`chain.base.Chain` implementation: bittensor 11's ``bt.Client``.

The same code runs on finney, testnet, a local subtensor or the embedded chain;
only the ``bittensor.Substrate`` under the client differs (the SDK's RPC backend,
or :class:`chain.embedded.substrate.EmbeddedSubstrate`). Reads are pinned to one
block; writes go through ``client.execute`` with the SDK's intents, except
registration (see :meth:`SdkChain.register`).

The client connects on the first call. Transient failures (connection lost, RPC
policy, a pinned block's state gone) are retried with exponential backoff and then
raised as a transient :class:`ChainError` — :class:`ChainUnreachable`, naming the
endpoint and the cause, when the endpoint did not answer; refusals by the chain
carry the SDK's message.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import random
import socket
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import bittensor as bt
from bittensor.result import BittensorError, RpcConnectionError, RpcPolicyError
from bittensor.result import ChainError as SdkChainError

from protocol.metagraph import Axon, MetagraphSnapshot, Neuron

from .base import ChainError, Hyperparameters, WeightsResult, blocks_until_epoch
from .network import ChainUnreachable, Network

log = logging.getLogger("dagnet.chain")
T = TypeVar("T")
U16_MAX = 65_535
RAO_PER_TAO = 1_000_000_000
_REREADS = 8


class SdkChain:
    """One subnet seen from one wallet, through ``bt.Client``; ``wallet=None`` reads only."""

    def __init__(
        self, client: bt.Client, wallet: Any | None, netuid: int, *, retries: int = 4, backoff_s: float = 0.5
    ) -> None:
        self.client = client
        self.wallet = wallet
        self.netuid = netuid
        self.hotkey = wallet.hotkey.ss58_address if wallet is not None else ""
        self._retries = retries
        self._backoff = backoff_s
        self._snapshot = SnapshotBuilder()
        self._connected = False
        self._embedded: Path | None = None

    @classmethod
    def open(cls, network: Network, wallet: Any | None, netuid: int, **kwargs: Any) -> SdkChain:
        """A chain for ``network``; nothing is contacted until the first call."""
        if network.embedded_state is not None:
            from .embedded.substrate import EmbeddedSubstrate

            client = bt.Client("local", substrate=EmbeddedSubstrate(network.embedded_state))
        else:
            client = bt.Client(network.name)
        chain = cls(client, wallet, netuid, **kwargs)
        chain._connected = network.is_embedded  # the embedded substrate opens its state on its own
        chain._embedded = network.embedded_state
        return chain

    @property
    def where(self) -> str:
        """The chain as people name it: ``embedded:PATH``, a URL, or a network with its URL
        (``local (ws://127.0.0.1:9944)``)."""
        if self._embedded is not None:
            return f"embedded:{self._embedded}"
        endpoint = self.client.endpoint
        return endpoint if self.client.network == endpoint else f"{self.client.network} ({endpoint})"

    async def _attempt(self, what: str, op: Callable[[], Awaitable[T]]) -> T:
        """``op()``, retried as the module says. A read whose pinned block the chain has
        discarded (the head moved on between two reads) is read again at once, at most
        ``_REREADS`` times, whatever the retry budget: it is a race, not a failure."""
        delay = self._backoff
        attempt = rereads = 0
        while True:
            try:
                if attempt or not self._connected:
                    await self.client.connect()
                    self._connected = True
                return await op()
            except RpcPolicyError as exc:
                error = ChainError(f"{what}: {exc}", transient=True)
            except (TimeoutError, RpcConnectionError, OSError) as exc:
                error = self._unreachable(exc, what)
            except SdkChainError as exc:
                if "discarded" not in str(exc):
                    raise ChainError(f"{what}: {exc}") from exc
                error = ChainError(f"{what}: {exc}", transient=True)
                rereads += 1
                if rereads <= _REREADS:
                    continue
            except BittensorError as exc:
                raise ChainError(f"{what}: {exc}") from exc
            if attempt >= self._retries:
                raise error
            attempt += 1
            # an unreachable chain is the caller's to report (OutageWarner: once a minute)
            log.log(
                logging.DEBUG if isinstance(error, ChainUnreachable) else logging.WARNING,
                "%s failed (%s); retrying in %.1fs",
                what,
                error,
                delay,
            )
            await asyncio.sleep(delay * (1 + random.random() / 2))
            delay = min(delay * 2, 30.0)

    def _wallet(self, what: str) -> Any:
        """The wallet ``what`` needs; a chain opened with ``wallet=None`` has none."""
        if self.wallet is None:
            raise ChainError(f"{what}: this chain was opened without a wallet (it reads only)")
        return self.wallet

    def _unreachable(self, exc: BaseException, what: str) -> ChainUnreachable:
        return ChainUnreachable(self.where, _cause(exc), what=what)

    async def connect(self) -> None:
        await self._attempt("connect", self.client.connect)

    async def close(self) -> None:
        await self.client.close()

    async def block(self) -> int:
        return await self._attempt("read the block", self.client.block)

    async def metagraph(self, block: int | None = None) -> MetagraphSnapshot:
        async def read() -> MetagraphSnapshot:
            at = block if block is not None else await self.client.block()
            graph = await self.client.subnets.metagraph(self.netuid, block=at, commitments=False)
            if graph is None:
                raise SdkChainError(f"subnet {self.netuid} does not exist on {self.where}")
            return self._snapshot(graph)

        return await self._attempt("read the metagraph", read)

    async def hyperparameters(self) -> Hyperparameters:
        async def read() -> Hyperparameters:
            at = await self.client.block()
            st = bt.storage.SubtensorModule
            names = (
                st.Tempo,
                st.WeightsSetRateLimit,
                st.ImmunityPeriod,
                st.MaxWeightsLimit,
                st.MinAllowedWeights,
                st.CommitRevealWeightsEnabled,
                st.WeightsVersionKey,
            )
            values = await asyncio.gather(*(self.client.query(n, [self.netuid], block=at) for n in names))  # type: ignore[arg-type]  # bittensor's storage.Item is a 3-field NamedTuple, query() is typed for a pair
            tempo, rate, immunity, max_weight, min_weights, commit_reveal, weights_version = values
            return Hyperparameters(
                tempo=int(tempo or 0),
                weights_rate_limit=int(rate or 0),
                immunity_period=int(immunity or 0),
                max_weight_limit=int(U16_MAX if max_weight is None else max_weight) / U16_MAX,
                min_allowed_weights=int(min_weights or 0),
                commit_reveal_enabled=bool(commit_reveal),
                weights_version=int(weights_version or 0),
            )

        return await self._attempt("read the hyperparameters", read)

    async def blocks_until_epoch(self) -> int:
        async def read() -> int:
            block = await self.client.block()
            tempo = int(await self.client.query(bt.storage.SubtensorModule.Tempo, [self.netuid], block=block) or 0)  # type: ignore[arg-type]  # bittensor's storage.Item is a 3-field NamedTuple, query() is typed for a pair
            return blocks_until_epoch(block, self.netuid, tempo)

        return await self._attempt("read the epoch schedule", read)

    async def owner_hotkey(self) -> str | None:
        owner = await self._attempt(
            "read the subnet owner's hotkey",
            lambda: self.client.query(bt.storage.SubtensorModule.SubnetOwnerHotkey, [self.netuid]),  # type: ignore[arg-type]  # bittensor's storage.Item is a 3-field NamedTuple, query() is typed for a pair
        )
        return str(owner) if owner else None

    async def serve_axon(self, host: str, port: int) -> None:
        intent = bt.ServeAxon(netuid=self.netuid, ip=_ip_of(host), port=port)
        result = await self._attempt(
            "serve the axon", lambda: self.client.execute(intent, self._wallet("serve the axon"))
        )
        if not result.success:
            raise ChainError(f"serve the axon: {result.message}")

    async def set_weights(self, uids: Sequence[int], weights: Sequence[float], version_key: int) -> WeightsResult:
        intent = bt.SetWeights(netuid=self.netuid, uids=list(uids), weights=list(weights), version_key=version_key)
        try:
            result = await self._attempt(
                "set weights", lambda: self.client.execute(intent, self._wallet("set weights"))
            )
        except ChainError as exc:
            if exc.transient:
                raise
            return WeightsResult(False, str(exc))
        block = int(result.extrinsic_id.split("-")[0]) if result.success and result.extrinsic_id else None
        return WeightsResult(result.success, result.message, block)

    async def register(self) -> int:
        """``burned_register`` as a raw call: the SDK's ``BurnedRegister`` intent insists on MEV
        shielding, which the embedded chain cannot serve; a live node accepts both."""
        call = bt.calls.SubtensorModule.burned_register(netuid=self.netuid, hotkey=self.hotkey)
        result = await self._attempt("register", lambda: self.client.submit_call(call, self._wallet("register")))
        if not result.success:
            raise ChainError(f"register: {result.message}")
        neuron = (await self.metagraph()).by_hotkey(self.hotkey)
        if neuron is None:
            raise ChainError(f"register: {self.hotkey} is not in the metagraph after registering")
        return neuron.uid

    async def subnet_owners(self) -> dict[int, str]:
        """Every subnet on the chain and its owner's coldkey, by netuid."""
        rows = await self._attempt(
            "read the subnet owners",
            lambda: self.client.query_map(bt.storage.SubtensorModule.SubnetOwner),  # type: ignore[arg-type]  # bittensor's storage.Item is a 3-field NamedTuple, query() is typed for a pair
        )
        return {int(netuid): str(owner) for netuid, owner in sorted(rows)}

    async def owned_subnets(self) -> list[int]:
        """The netuids whose owner is this wallet's coldkey, lowest first."""
        coldkey = self._wallet("find the owned subnets").coldkeypub.ss58_address
        return [netuid for netuid, owner in (await self.subnet_owners()).items() if owner == coldkey]

    async def create_subnet(self) -> int:
        """``register_network`` (the SDK's ``RegisterSubnet``) with this wallet as owner; the new netuid.

        Submitted once, never retried: a second submission would pay for a second subnet."""
        intent = bt.RegisterSubnet(hotkey_ss58=self.hotkey)
        try:
            if not self._connected:
                await self.client.connect()
                self._connected = True
            result = await self.client.execute(intent, self._wallet("create a subnet"))
        except RpcPolicyError as exc:
            raise ChainError(f"create a subnet: {exc}", transient=True) from exc
        except (TimeoutError, RpcConnectionError, OSError) as exc:
            raise self._unreachable(exc, "create a subnet") from exc
        except BittensorError as exc:
            raise ChainError(f"create a subnet: {exc}") from exc
        if not result.success:
            raise ChainError(f"create a subnet: {result.message}")
        if "netuid" not in result.data:
            raise ChainError(f"create a subnet: the chain accepted the call but named no new subnet ({result.message})")
        return int(result.data["netuid"])

    async def started(self) -> bool:
        """Whether this subnet's ``start_call`` has run (its first emission block is set)."""
        first = await self._attempt(
            "read the first emission block",
            lambda: self.client.query(bt.storage.SubtensorModule.FirstEmissionBlockNumber, [self.netuid]),  # type: ignore[arg-type]  # bittensor's storage.Item is a 3-field NamedTuple, query() is typed for a pair
        )
        return first is not None

    async def start(self, *, timeout_s: float) -> None:
        """``start_call`` for this subnet (its owner only), once the chain's delay since the subnet's
        registration has passed: waits for that block, at most ``timeout_s`` seconds."""
        st = bt.storage.SubtensorModule
        registered_at, delay = await self._attempt(
            "read the start schedule",
            lambda: asyncio.gather(
                # bittensor's storage.Item is a 3-field NamedTuple, query() is typed for a pair
                self.client.query(st.NetworkRegisteredAt, [self.netuid]),  # type: ignore[arg-type]
                self.client.query(st.StartCallDelay),  # type: ignore[arg-type]
            ),
        )
        earliest = int(registered_at or 0) + int(delay or 0)
        try:
            if await self.block() < earliest:
                await self.client.wait_for_block(earliest, timeout=timeout_s)
        except TimeoutError:
            raise ChainError(
                f"start subnet {self.netuid}: it can start at block {earliest}, not reached in {timeout_s:g} s"
            ) from None
        result = await self._attempt(
            "start the subnet",
            lambda: self.client.execute(bt.StartCall(netuid=self.netuid), self._wallet("start the subnet")),
        )
        if not result.success:
            raise ChainError(f"start subnet {self.netuid}: {result.message}")

    async def stake(self, amount_tao: float) -> None:
        intent = bt.AddStake(
            hotkey_ss58=self.hotkey, netuid=self.netuid, amount_tao=amount_tao, slippage_protection=False
        )
        result = await self._attempt("stake", lambda: self.client.execute(intent, self._wallet("stake")))
        if not result.success:
            raise ChainError(f"stake: {result.message}")


class SnapshotBuilder:
    """``bt.Metagraph`` → our snapshot: stake and emission in tokens, scores as fractions.

    Neurons are immutable, so one whose fields are unchanged since the previous
    snapshot is reused rather than rebuilt: most of a metagraph is the same from
    one read to the next.
    """

    def __init__(self) -> None:
        self._previous: dict[tuple, Neuron] = {}

    def __call__(self, graph: Any) -> MetagraphSnapshot:
        built: dict[tuple, Neuron] = {}
        for n in graph.neurons:
            fields = (
                n.uid,
                n.hotkey,
                n.coldkey,
                n.total_stake.rao,
                n.validator_permit,
                n.axon,
                n.incentive,
                n.dividends,
                n.emission.rao,
                n.trust,
                n.consensus,
                n.last_update,
                n.block_at_registration,
            )
            built[fields] = self._previous.get(fields) or _neuron(*fields)
        self._previous = built
        return MetagraphSnapshot(netuid=graph.netuid, block=graph.block, neurons=tuple(built.values()))


def _neuron(
    uid: int,
    hotkey: str,
    coldkey: str,
    stake_rao: int,
    permit: bool,
    endpoint: str | None,
    incentive: float,
    dividends: float,
    emission_rao: int,
    trust: float,
    consensus: float,
    last_update: int,
    registered: int,
) -> Neuron:
    return Neuron(
        uid=uid,
        hotkey=hotkey,
        coldkey=coldkey,
        stake=stake_rao / RAO_PER_TAO,
        validator_permit=permit,
        axon=_axon_of(endpoint),
        incentive=incentive,
        dividends=dividends,
        emission=emission_rao / RAO_PER_TAO,
        trust=trust,
        consensus=consensus,
        last_update=last_update,
        registered_block=registered,
    )


def _axon_of(endpoint: str | None) -> Axon | None:
    if not endpoint:
        return None
    host, _, port = endpoint.rpartition(":")
    return Axon(host=host.strip("[]"), port=int(port))


def _cause(exc: BaseException) -> str:
    """A transport failure in the words an operator acts on."""
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    text = str(exc).removeprefix("could not connect to any endpoint: ")
    return text or type(exc).__name__


def _ip_of(host: str) -> str:
    """An address the chain can store: IP literals as they are, names resolved."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return socket.gethostbyname(host)
