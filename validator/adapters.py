"""External execution, opt-in and untrusted: which nodes of a plan go to tool providers,
and when a provider's answer counts.

The validator executes every plan itself unless the operator's adapters table
(docs/validator.md, adapters) gives one of the task's subnets ``dagnet`` providers.
Then the task's plans run on the wall clock through an :class:`AdapterRunner`: nodes
of those subnets go to the providers, every other node to the owned runner. What a
provider may do is decided here, and only here (docs/validator.md, trust model):

1. **Who may serve a plan.** :func:`trusted_selector` drops every provider whose
   hotkey is registered on the validator's own netuid (a miner is never a provider:
   not of its own plan, not of a competitor's), and every provider sharing the
   hotkey or the coldkey of the miner whose plan runs. A node left without a
   provider runs on the owned runner.
2. **What a node costs.** The validator's price for its subnet, ``avg_cost × top_k``
   (:func:`engine.evaluate.expected_prices`), for every attempt that reached a
   provider: what the providers claim to charge is never read.
3. **Which answer counts.** For a deterministic action (every action but ``llm``), only
   an output that equals the validator's own re-run of the node on the bare tools:
   however many providers agree, agreement is not evidence (two colluding providers
   agree as easily as one lies). The re-run starts beside the providers and is
   metered like owned execution. When the re-run fails, or no provider's output
   equals it, the node fails with a reason naming them. ``llm`` answers cannot be
   re-run; they are aggregated by the task's routing rule.
4. **How long a node takes.** Never the slowest provider's time: a deterministic node
   ends with the first provider answer that equals the re-run (the rest are
   cancelled); an ``llm`` node aggregates the answers in when the subnet's published
   latency (``avg_latency``) has passed, or the first valid answer if none was in by
   then. A provider that answers late, or never, cannot make a competitor's node slow.
5. **Generator nodes** (``split``) run on the owned runner: frames cannot be voted on
   one by one, and re-running a generator is running it.

A provider sees only the node's params: the hidden inputs a plan chose to pass it.
A plan that hands a provider every ``${input.*}`` to have it "solve" the instance gains
nothing by rule 3: the answer counts only if the action, run on those params by the
validator, gives the same output.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence

from engine.evaluate import expected_prices
from engine.routing import combine, deterministic
from protocol.metagraph import MetagraphSnapshot, Peer
from protocol.output import NodeOutput
from protocol.runner import Emit, FrameRunner, NodeCall, NodeResult, NodeRunner
from protocol.synapse import Aggregation, TaskPackage
from protocol.task import Task

from .client import MinerClient
from .providers import Provider, ProviderDirectory
from .remote import ProviderSelector, RemoteRunner

__all__ = ["AdapterRunner", "BySubnet", "runs_external", "settle", "tools_only", "trusted_selector"]


def trusted_selector(
    directory: ProviderDirectory, miner: Peer, *, miner_coldkey: str, own: MetagraphSnapshot | None
) -> ProviderSelector:
    """``subnet -> providers`` that may serve ``miner``'s plan (rule 1), best first.

    ``own`` is the validator's own netuid's metagraph; ``miner_coldkey`` is ``""`` when
    unknown (then only the hotkey rules apply).
    """
    registered = frozenset(n.hotkey for n in own.neurons) if own is not None else frozenset()

    def allowed(provider: Provider) -> bool:
        hotkey = provider.peer.hotkey
        if hotkey in registered or hotkey == miner.hotkey:
            return False
        return not (miner_coldkey and provider.coldkey == miner_coldkey)

    return lambda subnet: [p.peer for p in directory.providers(subnet, miner.uid) if allowed(p)]


class AdapterRunner:
    """A plan's runner when some of its task's subnets have dagnet adapters.

    ``serves(subnet)`` says which subnets go to providers (chosen by ``select``); the
    rest, and every node left without a trusted provider, run on ``local`` (the owned
    runner, playing the task's profile). ``rerun`` (the bare tools, metered per plan as
    owned execution is) checks every deterministic answer; without it none counts.
    """

    __slots__ = ("_remote", "_select", "_serves", "_local", "_rerun", "_package", "_prices", "_latency")

    def __init__(
        self,
        client: MinerClient,
        select: ProviderSelector,
        package: TaskPackage,
        *,
        serves: Callable[[str], bool],
        local: NodeRunner | None,
        rerun: NodeRunner | None,
    ) -> None:
        self._remote = RemoteRunner(client, select, package)
        self._select = select
        self._serves = serves
        self._local = local
        self._rerun = rerun
        self._package = package
        self._prices = expected_prices(package)
        self._latency = {subnet: info.avg_latency for subnet, info in package.available_tools.items()}

    async def run(self, call: NodeCall) -> NodeResult:
        if not self._serves(call.subnet) or not self._select(call.subnet):
            return await self._run_local(call)
        checks = deterministic(call.action)
        if checks and self._rerun is None:
            return NodeResult(None, error=f"no answer of {call.action} can be confirmed: the validator has no re-run")
        asking = self._remote.asking(call)
        if isinstance(asking, NodeResult):
            return asking
        price, aggregation = self._prices.get(call.subnet, 0.0), self._package.route(call.subnet).aggregation
        if not checks:
            answers = await _voting(asking, window_s=self._latency.get(call.subnet, 0.0))
            return settle(call, answers, price=price, aggregation=aggregation)
        assert self._rerun is not None
        answers, rerun = await _confirming(asking, self._rerun.run(call))
        return settle(call, answers, price=price, aggregation=aggregation, rerun_result=rerun)

    async def run_frames(self, call: NodeCall, emit: Emit) -> NodeResult:
        if not isinstance(self._local, FrameRunner):
            return NodeResult(None, error=f"generator node {call.node_id} needs the owned runner")
        return await self._local.run_frames(call, emit)

    async def _run_local(self, call: NodeCall) -> NodeResult:
        if self._local is None:
            return NodeResult(None, error=f"no trusted provider for subnet {call.subnet} and no owned runner")
        return await self._local.run(call)


class BySubnet:
    """A runner that hands each node to its subnet's runner, and the rest to ``default``
    (the owned runner with each openai adapter's endpoint behind ``llm``)."""

    __slots__ = ("_routes", "_default")

    def __init__(self, routes: Mapping[str, NodeRunner], default: NodeRunner) -> None:
        self._routes = dict(routes)
        self._default = default

    async def run(self, call: NodeCall) -> NodeResult:
        return await self._routes.get(call.subnet, self._default).run(call)

    async def run_frames(self, call: NodeCall, emit: Emit) -> NodeResult:
        runner = self._routes.get(call.subnet, self._default)
        if not isinstance(runner, FrameRunner):
            return NodeResult(None, error=f"subnet {call.subnet} cannot run generator node {call.node_id}")
        return await runner.run_frames(call, emit)


def settle(
    call: NodeCall,
    answers: Sequence[tuple[Peer, NodeResult]],
    *,
    price: float,
    aggregation: Aggregation,
    rerun_result: NodeResult | None = None,
) -> NodeResult:
    """The node's result from the providers' ``answers`` in hand under rules 2 and 3.

    ``rerun_result`` is the validator's re-run of the node, ``None`` when none was made
    (then no deterministic answer counts).
    """
    retries = sum(answer.unplanned_retries for _, answer in answers)

    def result(output: NodeOutput | None, error: str | None = None) -> NodeResult:
        return NodeResult(output, cost_tao=price, error=error, unplanned_retries=retries)

    checks = deterministic(call.action)
    if checks and rerun_result is not None and rerun_result.output is None:
        return result(None, f"no answer can be confirmed: the validator's re-run failed: {rerun_result.error}")
    given = [(peer, answer.output) for peer, answer in answers if answer.output is not None]
    if not given:
        return result(None, _errors(answers))
    if not checks:
        voted = combine([answer for _, answer in answers], aggregation)
        return result(voted.output, voted.error)
    names = ", ".join(_name(peer) for peer, _ in given)
    if rerun_result is None:
        return result(None, f"answer of {names} unconfirmed: the validator has no re-run of {call.action}")
    for _, output in given:
        if output == rerun_result.output:
            return result(output)
    return result(None, f"answer of {names} differs from the validator's re-run of {call.action}")


async def _confirming(
    asking: Sequence[tuple[Peer, Awaitable[NodeResult]]], rerun: Awaitable[NodeResult]
) -> tuple[list[tuple[Peer, NodeResult]], NodeResult | None]:
    """The providers' answers in when the node is decided (rules 3 and 4), and the re-run's
    result (``None`` when it was not needed to decide). Decided: the re-run failed, or an
    answer equals it, or every provider answered and none gave an output, or everything is in.
    What is still running then is cancelled."""
    check = asyncio.ensure_future(rerun)
    asked = {asyncio.ensure_future(answer): peer for peer, answer in asking}
    pending: set[asyncio.Future[NodeResult]] = {check, *asked}
    try:
        while pending:
            _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            answers = _in(asked)
            heard = not (pending - {check}) and all(answer.output is None for _, answer in answers)
            if heard or (check.done() and _confirmed(check.result(), answers)):
                break
        return _in(asked), check.result() if check.done() else None
    finally:
        for future in pending:
            future.cancel()


def _confirmed(rerun: NodeResult, answers: Sequence[tuple[Peer, NodeResult]]) -> bool:
    """Whether ``rerun`` decides the node: it failed, or an answer equals its output."""
    return rerun.output is None or any(answer.output == rerun.output for _, answer in answers)


async def _voting(
    asking: Sequence[tuple[Peer, Awaitable[NodeResult]]], *, window_s: float
) -> list[tuple[Peer, NodeResult]]:
    """The answers in after ``window_s`` (the subnet's published latency), or the first
    valid one when none was in by then (rule 4); later ones are cancelled."""
    asked = {asyncio.ensure_future(answer): peer for peer, answer in asking}
    pending: set[asyncio.Future[NodeResult]] = set(asked)
    try:
        done, pending = await asyncio.wait(pending, timeout=window_s)
        while pending and all(future.result().output is None for future in done):
            more, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            done |= more
        return _in(asked)
    finally:
        for future in pending:
            future.cancel()


def _in(asked: Mapping[asyncio.Task[NodeResult], Peer]) -> list[tuple[Peer, NodeResult]]:
    """The answers in so far, in provider order."""
    return [(peer, future.result()) for future, peer in asked.items() if future.done() and not future.cancelled()]


def _errors(answers: Sequence[tuple[Peer, NodeResult]]) -> str:
    if not answers:
        return "no provider answered"
    if len(answers) == 1:
        return answers[0][1].error or "provider returned no output"
    return "; ".join(f"uid {peer.uid}: {answer.error}" for peer, answer in answers)


def _name(peer: Peer) -> str:
    return f"provider uid {peer.uid} ({peer.hotkey})"


def tools_only(task: Task) -> Task:
    """``task`` without its partner subnets: the owned runner built for it runs the bare
    tools (no price, delay or failure of a profile), which is how a provider's node is re-run."""
    return task.model_copy(update={"available_tools": {}})


def runs_external(directory: ProviderDirectory | None, subnets: Sequence[str]) -> bool:
    """Whether a task on ``subnets`` runs through adapters (on the wall clock)."""
    return directory is not None and any(directory.serves(subnet) for subnet in subnets)
