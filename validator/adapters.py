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
3. **Which answer counts.** For a deterministic action (every action but ``llm``), an
   output that at least two providers gave and no other output matched as often; else
   the output of a provider that equals the validator's own re-run of the node on the
   bare tools. When no provider's output equals the re-run, the node fails with a
   reason naming them. ``llm`` answers cannot be re-run; they are aggregated by the
   task's routing rule.
4. **Generator nodes** (``split``) run on the owned runner: frames cannot be voted on
   one by one, and re-running a generator is running it.

A provider sees only the node's params: the hidden inputs a plan chose to pass it.
A plan that hands a provider every ``${input.*}`` to have it "solve" the instance gains
nothing by rule 3: the answer counts only if the action, run on those params by the
validator, gives the same output.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence

from protocol.metagraph import MetagraphSnapshot, Peer
from protocol.output import NodeOutput
from protocol.runner import Emit, FrameRunner, NodeCall, NodeResult, NodeRunner
from protocol.synapse import TaskPackage
from protocol.task import Task

from .client import MinerClient
from engine.evaluate import expected_prices
from .providers import Provider, ProviderDirectory
from .remote import ProviderSelector, RemoteRunner
from .routing import aggregate

__all__ = ["AdapterRunner", "BySubnet", "UNVERIFIABLE", "deterministic", "runs_external", "settle", "tools_only", "trusted_selector"]

UNVERIFIABLE = frozenset({"llm"})
"""Actions whose answer the validator cannot re-run to check (a model's sampling)."""


def deterministic(action: str) -> bool:
    """Whether a provider's answer to ``action`` must be confirmed (rule 3)."""
    return action not in UNVERIFIABLE


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
    runner, playing the task's profile). ``rerun`` (the bare tools) checks answers.
    """

    __slots__ = ("_remote", "_select", "_serves", "_local", "_rerun", "_package", "_prices")

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

    async def run(self, call: NodeCall) -> NodeResult:
        if not self._serves(call.subnet) or not self._select(call.subnet):
            return await self._run_local(call)
        verify_now = deterministic(call.action) and self._package.route(call.subnet).top_k < 2
        if verify_now and self._rerun is not None:  # re-run while the provider works: no added latency
            asked, local = await asyncio.gather(self._remote.ask(call), self._rerun.run(call))
        else:
            asked, local = await self._remote.ask(call), None
        if isinstance(asked, NodeResult):
            return asked
        return await settle(
            call, asked, price=self._prices.get(call.subnet, 0.0),
            aggregation=self._package.route(call.subnet).aggregation, rerun=self._rerun, rerun_result=local,
        )

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


async def settle(
    call: NodeCall,
    answers: Sequence[tuple[Peer, NodeResult]],
    *,
    price: float,
    aggregation: str,
    rerun: NodeRunner | None,
    rerun_result: NodeResult | None = None,
) -> NodeResult:
    """The node's result from its providers' ``answers`` under rules 2 and 3.

    ``rerun_result`` is the validator's re-run when it was already made; otherwise
    ``rerun`` makes it when rule 3 needs it.
    """
    retries = sum(answer.unplanned_retries for _, answer in answers)

    def result(output: NodeOutput | None, error: str | None = None) -> NodeResult:
        return NodeResult(output, cost_tao=price, error=error, unplanned_retries=retries)

    given = [(peer, answer.output) for peer, answer in answers if answer.output is not None]
    if not given:
        if len(answers) == 1:
            return result(None, answers[0][1].error)
        return result(None, "; ".join(f"uid {peer.uid}: {answer.error}" for peer, answer in answers))
    if not deterministic(call.action):
        combined = aggregate([output for _, output in given], aggregation)
        return result(combined, None if combined is not None else f"no numeric output to aggregate ({aggregation})")
    agreed = _agreed([output for _, output in given])
    if agreed is not None:
        return result(agreed)
    names = ", ".join(_name(peer) for peer, _ in given)
    if rerun_result is None:
        if rerun is None:
            return result(None, f"answer of {names} unconfirmed: no second provider agrees and no re-run is possible")
        rerun_result = await rerun.run(call)
    if rerun_result.output is None:
        return result(None, f"answer of {names} unconfirmed: the validator's re-run failed: {rerun_result.error}")
    for _, output in given:
        if output == rerun_result.output:
            return result(output)
    return result(None, f"answer of {names} differs from the validator's re-run of {call.action}")


def _agreed(outputs: Sequence[NodeOutput]) -> NodeOutput | None:
    """The output at least two of ``outputs`` are, when no other is as common."""
    groups: dict[str, list[NodeOutput]] = {}
    for output in outputs:
        groups.setdefault(output.model_dump_json(), []).append(output)
    ranked = sorted((len(group) for group in groups.values()), reverse=True)
    if ranked[0] < 2 or (len(ranked) > 1 and ranked[1] == ranked[0]):
        return None
    return next(group[0] for group in groups.values() if len(group) == ranked[0])


def _name(peer: Peer) -> str:
    return f"provider uid {peer.uid} ({peer.hotkey})"


def tools_only(task: Task) -> Task:
    """``task`` without its partner subnets: the owned runner built for it runs the bare
    tools (no price, delay or failure of a profile), which is how a provider's node is re-run."""
    return task.model_copy(update={"available_tools": {}})


def runs_external(directory: ProviderDirectory | None, subnets: Sequence[str]) -> bool:
    """Whether a task on ``subnets`` runs through adapters (on the wall clock)."""
    return directory is not None and any(directory.serves(subnet) for subnet in subnets)
