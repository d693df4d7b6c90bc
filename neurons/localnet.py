"""``dagnet localnet``: the whole subnet on one machine, on the embedded chain.

One command starts, as separate processes, the embedded chain node, N miners
with a mix of strategies (good, naive, the attackers invalid and precompute, and the
learner, which learns from the validator's feedback),
a miner for each planner of your own (``--planner NAME``, beside them) and one validator, which executes every plan itself (owned execution, as on any
network: no tool provider is needed). This process registers every hotkey and
stakes the validator. The miners follow the chain's metagraph as they would on a
live subnet, serving their own axons and admitting whom the chain says; the validator
starts once the first epoch has given it a permit and every miner has seen it.
Then this process watches: the chain's metagraph and the validator's state file
feed a live leaderboard until the run ends (``tempos`` epochs or ``duration``
seconds), and the summary comes from the chain (weights the validator set,
incentive and emission per miner).

Every process logs to one folder (by default ``localnet-<UTC time>/`` under
``$XDG_CACHE_HOME/dagnet``, i.e. ``~/.cache/dagnet``: outside any checkout; the path is
printed first and last; the default location keeps the last :data:`KEEP_RUNS` runs). Until the first leaderboard, each phase (chain up, keys
registered, processes started, waiting for the first epoch, …) is reported as it
begins. The first Ctrl-C stops every process and prints what was reached; a second
kills them.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from rich.console import Console, Group
from rich.text import Text

from render.columns import ALWAYS, Column, fit_table, terminal_width
from sandbox.lifetime import dies_with_this_process
from validator.settings import SHIPPED_TASKS

STRATEGY_MIX = ("good", "naive", "invalid", "precompute", "learner")
"""The default miners' planners: the reference set, the attackers, and the example learner
(examples/learner-planner, shipped with dagnet), which learns from its feedback."""
COLDKEY_URI = "//Alice"
VALIDATOR_URI = "//dagnet-localnet-validator"
VALIDATOR_STAKE_TAO = 1_000.0
_LISTENING = re.compile(r"listening on (http://\S+)")
_START_TIMEOUT_S = 60.0
_STOP_GRACE_S = 10.0
_SCORE_PARTS = ("S", "S_success", "S_cost", "S_latency", "S_reliability")
KEEP_RUNS = 10
"""Run folders ``dagnet localnet`` keeps in its default location (2–10 MB each)."""


@dataclass(frozen=True, slots=True)
class LocalnetOptions:
    miners: int = len(STRATEGY_MIX)
    tempos: int | None = 3
    duration_s: float | None = None
    block_time_s: float = 1.0
    tempo: int = 20
    weights_rate_limit: int = 5
    tasks: Path = SHIPPED_TASKS
    run_dir: Path | None = None
    planners: tuple[str, ...] = ()
    """Planners of your own (named as for ``dagnet miner --planner``), one miner each after the mix."""
    keep_runs: int = KEEP_RUNS
    """Without ``run_dir``: the default folder's runs kept, this one included (older ones are removed)."""


def default_run_dir() -> Path:
    """``$XDG_CACHE_HOME/dagnet/localnet-<UTC time>`` (``~/.cache`` without the variable)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "dagnet" / f"localnet-{datetime.now(UTC):%Y%m%d-%H%M%S}"


def prune_runs(parent: Path, keep: int) -> list[Path]:
    """Remove the ``localnet-*`` run folders under ``parent`` but the newest ``keep`` (by
    their UTC-time names), sparing any whose chain still runs; returns those removed."""
    from chain.embedded.lock import node_running

    runs = sorted(p for p in parent.glob("localnet-*") if p.is_dir()) if parent.is_dir() else []
    removed = [run for run in runs[: max(len(runs) - keep, 0)] if not node_running(run / "chain.sqlite")]
    for run in removed:
        shutil.rmtree(run, ignore_errors=True)
    return removed


def strategies(count: int, planners: Sequence[str] = ()) -> list[str]:
    """The planner of each miner: the mix in order, repeated, then ``planners``."""
    return [*(STRATEGY_MIX[i % len(STRATEGY_MIX)] for i in range(count)), *planners]


@dataclass
class MinerInfo:
    strategy: str
    hotkey: str
    uid: int | None = None
    url: str | None = None


@dataclass
class Reached:
    """Where the network is: what the live view draws and the summary reports."""

    run_dir: str
    block: int = 0
    start_block: int = 0
    end_block: int | None = None
    blocks_to_epoch: int | None = None
    tempo: int = 0
    steps: int = 0
    last_weights_block: int | None = None
    payout: str | None = None
    """Where the last weights sent the emission (:class:`scoring.margin.Payout`); ``None`` before any."""
    burn_uid: int | None = None
    burned: float = 0.0
    """The weight the last weights gave ``burn_uid`` (the subnet owner's uid) when nobody beat the reference."""
    miners: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return asdict(self)


class Processes:
    """Child processes, each logging to ``<run_dir>/<name>.log``."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.children: dict[str, subprocess.Popen] = {}

    def start(self, name: str, args: Sequence[str]) -> Path:
        log = self.run_dir / f"{name}.log"
        with log.open("ab") as out:
            self.children[name] = subprocess.Popen(
                [sys.executable, *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # a terminal's Ctrl-C reaches this process only; it stops the rest
                preexec_fn=dies_with_this_process(),  # and a kill -9 of this one takes them too
            )
        return log

    async def url_of(self, name: str) -> str:
        """The ``listening on URL`` a child announces in its log."""
        log, child = self.run_dir / f"{name}.log", self.children[name]
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            found = _LISTENING.search(log.read_text(errors="replace"))
            if found:
                return found.group(1)
            if child.poll() is not None:
                raise RuntimeError(f"{name} exited with {child.returncode}; see {log}")
            await asyncio.sleep(0.1)
        raise RuntimeError(f"{name} did not start within {_START_TIMEOUT_S:g}s; see {log}")

    def check_alive(self) -> None:
        """Raise naming every child that has exited (its log says why)."""
        dead = [name for name, child in self.children.items() if child.poll() is not None]
        if dead:
            raise RuntimeError(f"{', '.join(dead)} exited; logs in {self.run_dir}")

    def stop(self, *, kill: bool = False) -> None:
        """Stop the children, the last started first (the validator before the chain it talks to)."""
        for child in reversed(list(self.children.values())):
            if child.poll() is None:
                with _quiet():
                    os.killpg(child.pid, signal.SIGKILL if kill else signal.SIGTERM)
                try:
                    child.wait(timeout=None if kill else _STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    with _quiet():
                        os.killpg(child.pid, signal.SIGKILL)
                    child.wait()


class _quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, value, tb) -> bool:
        return kind is not None and issubclass(kind, ProcessLookupError)


def _wallet(hotkey_uri: str) -> Any:
    from bittensor.sp_core import Keypair

    cold = Keypair.create_from_uri(COLDKEY_URI)
    return SimpleNamespace(coldkey=cold, coldkeypub=cold, hotkey=Keypair.create_from_uri(hotkey_uri))


def _chain(state: Path, hotkey_uri: str) -> Any:
    from chain.network import Network
    from chain.sdk import SdkChain

    return SdkChain.open(Network("embedded", state), _wallet(hotkey_uri), 1)


async def _register(state: Path, hotkey_uri: str) -> int:
    chain = _chain(state, hotkey_uri)
    try:
        return await chain.register()
    finally:
        await chain.close()


def _miner_uri(index: int, strategy: str) -> str:
    return f"//dagnet-localnet-{_plain(strategy)}-{index}"


def _miner_name(miner: MinerInfo) -> str:
    """The miner's process (and log file) name: ``miner-<uid>-<planner>``."""
    return f"miner-{miner.uid}-{_plain(miner.strategy)}"


def _plain(name: str) -> str:
    """A planner name (``package.module:attr`` too) as a file name and a key path can hold it."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name)


async def run_localnet(
    options: LocalnetOptions,
    stop: asyncio.Event,
    on_update: Callable[[Reached], None] = lambda r: None,
    on_phase: Callable[[str], None] = lambda line: None,
) -> Reached:
    """Run the network until it ends or ``stop`` is set; always stops every child.
    ``on_phase`` hears a short line as each start-up phase begins."""
    run_dir = options.run_dir or default_run_dir()
    if options.run_dir is None:
        pruned = prune_runs(run_dir.parent, options.keep_runs - 1)
        if pruned:
            on_phase(
                f"removed {len(pruned)} old run folder(s) from {run_dir.parent} (keeping the last {options.keep_runs})"
            )
    run_dir.mkdir(parents=True, exist_ok=True)
    on_phase(f"logs in {run_dir}")
    processes = Processes(run_dir)
    reached = Reached(run_dir=str(run_dir.resolve()), tempo=options.tempo)
    loop = asyncio.get_running_loop()
    interrupts = 0

    def interrupted() -> None:  # the first Ctrl-C stops the run, the second kills every child
        nonlocal interrupts
        interrupts += 1
        stop.set()
        if interrupts > 1:
            processes.stop(kill=True)

    loop.add_signal_handler(signal.SIGINT, interrupted)
    try:
        await _run(options, run_dir, processes, stop, reached, on_update, on_phase)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        processes.stop()
    return reached


async def _run(
    options: LocalnetOptions,
    run_dir: Path,
    processes: Processes,
    stop: asyncio.Event,
    reached: Reached,
    on_update: Callable[[Reached], None],
    say: Callable[[str], None],
) -> None:
    state = run_dir / "chain.sqlite"
    genesis = {"tempo": options.tempo, "weights_rate_limit": options.weights_rate_limit, "immunity_period": 10_000}
    say("starting the embedded chain")
    processes.start(
        "chain", ["-m", "neurons.localnet", "node", str(state), str(options.block_time_s), json.dumps(genesis)]
    )
    chain_url = await processes.url_of("chain")
    say(f"chain up at {chain_url} ({options.block_time_s:g} s blocks, tempo {options.tempo})")

    watcher = _chain(state, VALIDATOR_URI)
    try:
        planners = strategies(options.miners, options.planners)
        say(f"registering the validator (staking {VALIDATOR_STAKE_TAO:g} TAO) and {len(planners)} miners")
        await watcher.register()
        await watcher.stake(VALIDATOR_STAKE_TAO)
        miners = [MinerInfo(s, _wallet(_miner_uri(i, s)).hotkey.ss58_address) for i, s in enumerate(planners)]
        for index, miner in enumerate(miners):
            miner.uid = await _register(state, _miner_uri(index, miner.strategy))

        say(f"starting {len(miners)} miners: {', '.join(planners)}")
        await _start_miners(state, options, miners, processes)
        say(f"processes up; waiting for the first epoch (at most {options.tempo + 1} blocks)")
        ready_block = await _until_on_chain(watcher, miners, processes, options, stop)
        urls = [m.url for m in miners if m.url is not None]  # every one, once started
        if ready_block is not None:
            say(f"first epoch at block {ready_block}; waiting for the miners to sync it")
        if ready_block is None or not await _until_synced(urls, ready_block, processes, options, stop):
            return

        validator_state = run_dir / "validator.sqlite"
        processes.start(
            "validator",
            [
                "-m",
                "neurons.validator",
                "--dev-key",
                VALIDATOR_URI,
                "--network",
                f"embedded:{state}",
                "--netuid",
                "1",
                "--port",
                "0",
                "--state",
                str(validator_state),
                "--tasks",
                str(options.tasks),
                "--query-timeout",
                "8",
                "--poll",
                "0.2",
            ],
        )
        validator_url = await processes.url_of("validator")
        say(f"validator at {validator_url}; waiting for its first step")
        _write_prometheus_targets(run_dir, {"validator": [validator_url], "miner": urls})

        await _watch(watcher, validator_state, miners, processes, options, stop, reached, on_update)
    finally:
        await watcher.close()


async def _start_miners(
    state: Path, options: LocalnetOptions, miners: Sequence[MinerInfo], processes: Processes
) -> None:
    """Start the miners; returns once all listen (``miner.url`` set)."""
    # Every miner follows the chain, as the validator does: its blacklist admits
    # whom the chain's metagraph says, and it serves its own axon.
    common = [
        "--port",
        "0",
        "--network",
        f"embedded:{state}",
        "--netuid",
        "1",
        "--sync-every",
        "1",
        "--log-level",
        "warning",
    ]
    for index, miner in enumerate(miners):
        processes.start(
            _miner_name(miner),
            [
                "-m",
                "neurons.miner",
                "--dev-key",
                _miner_uri(index, miner.strategy),
                "--planner",
                miner.strategy,
                "--set",
                f"feedback_db={_feedback_db(state, miner)}",
                *common,
            ],
        )
    for miner in miners:
        miner.url = await processes.url_of(_miner_name(miner))


def _feedback_db(state: Path, miner: MinerInfo) -> Path:
    """A miner's feedback store, in a folder of its own: the store closes its folder to
    others (0700), which the run folder, holding every process's log, is not."""
    return state.parent / f"miner-{miner.uid}-feedback" / "feedback.sqlite"


async def _watch(
    watcher: Any,
    validator_state: Path,
    miners: Sequence[MinerInfo],
    processes: Processes,
    options: LocalnetOptions,
    stop: asyncio.Event,
    reached: Reached,
    on_update: Callable[[Reached], None],
) -> None:
    """Feed ``on_update`` until the run ends (its epochs or its duration) or ``stop`` is set."""
    reached.start_block = reached.block = await watcher.block()
    if options.tempos is not None:
        reached.end_block = reached.start_block + options.tempos * (options.tempo + 1)
    deadline = None if options.duration_s is None else time.monotonic() + options.duration_s
    while not stop.is_set():
        await _observe(watcher, validator_state, miners, reached)
        on_update(reached)
        processes.check_alive()
        if reached.end_block is not None and reached.block >= reached.end_block:
            break
        if deadline is not None and time.monotonic() >= deadline:
            break
        await _pause(stop, 1.0)
    await _observe(watcher, validator_state, miners, reached)
    on_update(reached)


async def _until_on_chain(
    chain: Any, miners: Sequence[MinerInfo], processes: Processes, options: LocalnetOptions, stop: asyncio.Event
) -> int | None:
    """The first block at which the validator holds a permit (the first epoch after its
    stake grants it) and every miner's axon is on chain; None if stopped first."""

    def ready(snapshot: Any) -> bool:
        validator = snapshot.by_hotkey(chain.hotkey)
        axons = [getattr(snapshot.by_uid(m.uid), "axon", None) for m in miners]
        return (
            validator is not None
            and validator.validator_permit
            and all(axon is not None and axon.url == m.url for axon, m in zip(axons, miners))
        )

    deadline = _start_deadline(options)
    while not stop.is_set():
        snapshot = await chain.metagraph()
        if ready(snapshot):
            return snapshot.block
        processes.check_alive()
        if time.monotonic() > deadline:
            raise RuntimeError("the validator's permit or the miners' axons never reached the chain; see the logs")
        await _pause(stop, options.block_time_s / 2)
    return None


async def _until_synced(
    urls: Sequence[str], block: int, processes: Processes, options: LocalnetOptions, stop: asyncio.Event
) -> bool:
    """Whether every miner at ``urls`` follows the chain up to ``block`` (its /health says
    which block its metagraph is from); False if stopped first."""
    import httpx

    deadline = _start_deadline(options)
    async with httpx.AsyncClient(timeout=5.0) as client:
        while not stop.is_set():
            replies = await asyncio.gather(*(client.get(url + "/health") for url in urls), return_exceptions=True)
            blocks = [r.json().get("metagraph_block") if isinstance(r, httpx.Response) else None for r in replies]
            if all(b is not None and b >= block for b in blocks):
                return True
            processes.check_alive()
            if time.monotonic() > deadline:
                lagging = [url for url, b in zip(urls, blocks) if b is None or b < block]
                raise RuntimeError(f"{', '.join(lagging)} never synced the chain's metagraph; see the logs")
            await _pause(stop, options.block_time_s / 2)
    return False


def _start_deadline(options: LocalnetOptions) -> float:
    return time.monotonic() + _START_TIMEOUT_S + (options.tempo + 1) * options.block_time_s


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        pass


async def _observe(chain: Any, validator_state: Path, miners: Sequence[MinerInfo], reached: Reached) -> None:
    from chain.base import ChainError, blocks_until_epoch
    from validator.state import ValidatorState

    try:
        snapshot = await chain.metagraph()
    except ChainError:
        return
    reached.block = snapshot.block
    reached.blocks_to_epoch = blocks_until_epoch(snapshot.block, snapshot.netuid, reached.tempo)
    if not validator_state.exists():
        return
    state = ValidatorState(validator_state)
    try:
        reached.steps = state.steps_settled()
        reached.last_weights_block = state.last_weights_block()
        weights, window, standing, paid = state.last_weights(), state.window(), state.standing(), state.last_payout()
        parts = _mean_parts(state)
    finally:
        state.close()
    reached.payout, reached.burn_uid = (None, None) if paid is None else (str(paid.payout), paid.burn_uid)
    reached.burned = 0.0 if paid is None or paid.burn_uid is None else weights.get(paid.burn_uid, 0.0)
    margins = _margins(standing)
    reached.miners = [
        _row(miner, snapshot.by_uid(miner.uid), weights.get(miner.uid, 0.0), window, parts.get(miner.uid, {}))
        | margins.get(miner.uid, {"mean_margin": 0.0, "beats_reference": 0.0})
        for miner in miners
        if miner.uid is not None  # every one: the summary follows registration
    ]


def _margins(standing: Any) -> dict[int, dict[str, float]]:
    """Per uid, the window's mean credited margin over the reference and how often it beat it."""
    from scoring.margin import beat_share

    return {
        uid: {"mean_margin": means.margin, "beats_reference": beat_share(standing.margins.get(uid, []))}
        for uid, means in standing.means().items()
    }


def _mean_parts(state: Any) -> dict[int, dict[str, float]]:
    """Per uid, the mean of each score part over its last :data:`~scoring.margin.WINDOW`
    records whose score is kept whole (a score past the record cap keeps only its hash)."""
    from scoring.margin import WINDOW

    by_uid: dict[int, list[dict[str, Any]]] = {}
    for record in state.executions():
        if isinstance(record.score, dict):
            by_uid.setdefault(record.uid, []).append(record.score)
    return {
        uid: {part: math.fsum(s[part] for s in scores[-WINDOW:]) / len(scores[-WINDOW:]) for part in _SCORE_PARTS}
        for uid, scores in by_uid.items()
    }


def _row(miner: MinerInfo, neuron: Any, weight: float, window: Any, parts: dict[str, float]) -> dict[str, Any]:
    return {
        "uid": miner.uid,
        "strategy": miner.strategy,
        "hotkey": miner.hotkey,
        "steps_scored": window.count(miner.uid) if miner.uid is not None else 0,
        "mean_S": parts.get("S", 0.0),
        **{f"mean_{p}": parts.get(p, 0.0) for p in _SCORE_PARTS[1:]},
        "weight": weight,
        "incentive": getattr(neuron, "incentive", 0.0),
        "emission": getattr(neuron, "emission", 0.0),
    }


# -- the live view ------------------------------------------------------------------


LEADERBOARD = (
    Column("uid", lambda r: str(r["uid"]), ALWAYS),
    Column("strategy", lambda r: r["strategy"], ALWAYS, justify="left"),
    Column("steps", lambda r: str(r["steps_scored"]), 5),
    Column("mean S", lambda r: f"{r['mean_S']:.3f}", ALWAYS),
    Column("margin", lambda r: f"{r['mean_margin']:+.3f}", ALWAYS),
    Column("beats", lambda r: f"{r['beats_reference']:.0%}", 5),
    Column("success", lambda r: f"{r['mean_S_success']:.3f}", 4),
    Column("cost", lambda r: f"{r['mean_S_cost']:.3f}", 3),
    Column("latency", lambda r: f"{r['mean_S_latency']:.3f}", 2),
    Column("reliab.", lambda r: f"{r['mean_S_reliability']:.3f}", 1),
    Column("weight", lambda r: f"{r['weight']:.3f}", 6),
    Column("incentive", lambda r: f"{r['incentive']:.3f}", ALWAYS),
    Column("emission", lambda r: f"{r['emission']:.4f}", ALWAYS),
)
"""The leaderboard's columns; at 80 columns the score parts go first (mean S sums them).
``margin`` is the window's mean credited margin over the validator's reference, ``beats``
the share of its steps that beat the reference: what the weights pay for."""


def render(reached: Reached, width: int | None = None) -> Group:
    """The leaderboard for a terminal ``width`` columns wide (default: this one's)."""
    width = terminal_width() if width is None else width
    facts = [
        f"block {reached.block}",
        f"next epoch in {reached.blocks_to_epoch} blocks (tempo {reached.tempo})",
        f"steps {reached.steps}",
        f"weights set {weights_age(reached)}",
        *([f"ends at block {reached.end_block}"] if reached.end_block else []),
    ]
    rows = sorted(reached.miners, key=lambda r: (-r["emission"], -r["mean_S"]))
    table = fit_table(LEADERBOARD, rows, width, title="dagnet localnet leaderboard")
    margins = Text("\n".join(margin_summary(reached)))
    return Group(
        Text(" · ".join(facts)),
        table,
        margins,
        Text(LEGEND, style="dim"),
        Text(f"logs: {reached.run_dir}", style="dim"),
    )


LEGEND = "margin: S − the reference's S · beats: steps above it · emission: α per epoch"
"""What the leaderboard's columns that are not plain scores mean, in one line at 80 columns:
``margin`` is the window's mean of a miner's S minus the validator's reference (``good``) on the
same instance, ``beats`` the share of its steps above the reference, ``emission`` the α the
chain paid the uid at its last epoch (the embedded chain emits 1 α a block)."""


def weights_age(reached: Reached) -> str:
    """When the shown weights were set: ``at block 1200 (34 blocks ago)``, or ``never yet``."""
    if reached.last_weights_block is None:
        return "never yet"
    age = max(reached.block - reached.last_weights_block, 0)
    return f"at block {reached.last_weights_block} ({age} block{'' if age == 1 else 's'} ago)"


def margin_summary(reached: Reached) -> list[str]:
    """Who is ahead of the reference in the window now (a mean margin above 0: before the
    bar a beater's margin must clear, and copies listed as their first is), and where the
    last weights (set earlier, from the window as it was then) sent the emission."""
    beaters = sorted((r for r in reached.miners if r["mean_margin"] > 0), key=lambda r: -r["mean_margin"])
    who = (
        "ahead of the reference now: "
        + ", ".join(
            f"uid {r['uid']} {r['strategy']} by {r['mean_margin']:+.3f} ({r['beats_reference']:.0%} of steps)"
            for r in beaters
        )
        if beaters
        else "nobody ahead of the reference now"
    )
    if reached.last_weights_block is None:
        return [who, "last weights: none set yet"]
    return [who, f"last weights, set {weights_age(reached)}: {_paid(reached, beaters)}"]


def _paid(reached: Reached, beaters: Sequence[dict[str, Any]]) -> str:
    """Where the weights sent the emission, from the weights and their payout kind; only the
    margin payout needs the window to tell who beat the reference from who is on the floor."""
    weighted = [r for r in reached.miners if r["weight"] > 0]
    if reached.payout == "margin":
        paid = [r for r in beaters if r["weight"] > 0]
        floor = [r for r in weighted if r not in paid]
        return f"{math.fsum(r['weight'] for r in paid):.0%} to the {len(paid)} that beat the reference, {_floor(floor)}"
    if reached.payout == "burn":
        floor = [r for r in weighted if r["uid"] != reached.burn_uid]
        return f"{reached.burned:.0%} burned to the subnet owner's uid {reached.burn_uid}, {_floor(floor)}"
    if reached.payout == "floor_only":
        return f"nobody beat the reference and the owner's hotkey is not on the subnet, so {_floor(weighted)}"
    return "where they sent the emission was not recorded"


def _floor(rows: Sequence[dict[str, Any]]) -> str:
    return f"{math.fsum(r['weight'] for r in rows):.0%} as the floor to {len(rows)} at or below the reference"


def localnet_main(options: LocalnetOptions, *, live: bool, console: Console) -> Reached:
    """Run with the live view (or silently), then print the final leaderboard when live."""
    from rich.live import Live
    from rich.spinner import Spinner

    async def main() -> Reached:
        stop = asyncio.Event()
        if not live:
            return await run_localnet(options, stop)
        with Live(Spinner("dots", "starting"), console=console, refresh_per_second=4, transient=True) as view:

            def phase(line: str) -> None:  # the line stays above the view; the spinner says what runs now
                console.print(f"· {line}", highlight=False, markup=False)
                view.update(Spinner("dots", line))

            reached = await run_localnet(options, stop, lambda r: view.update(render(r, console.width)), phase)
        return reached

    reached = asyncio.run(main())
    if live:
        console.print(render(reached, console.width))
    return reached


def _write_prometheus_targets(run_dir: Path, urls: dict[str, list[str]]) -> None:
    """``prometheus-targets.json``: every process's /metrics address for Prometheus's
    ``file_sd_configs``, labelled by role (docs/observability.md)."""
    groups = [
        {"targets": [url.removeprefix("http://") for url in role_urls], "labels": {"role": role}}
        for role, role_urls in urls.items()
    ]
    staged = run_dir / "prometheus-targets.json.tmp"
    staged.write_text(json.dumps(groups, indent=2))
    staged.replace(run_dir / "prometheus-targets.json")  # Prometheus never reads half a file


# -- the chain node child -----------------------------------------------------------


def _node_main(state: str, block_time: str, genesis: str) -> None:
    from chain.embedded.genesis import Genesis
    from chain.embedded.node import serve

    serve(
        Path(state),
        block_time=float(block_time),
        genesis=Genesis(**json.loads(genesis)),
        announce=lambda line: print(line, file=sys.stderr, flush=True),
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["node"]:
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        try:
            _node_main(*sys.argv[2:5])
        except KeyboardInterrupt:
            pass
