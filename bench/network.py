"""``dagnet bench network``: the validator and miner on the wire, measured.

Two measurements, each repeated and reported as medians:

1. **Miner throughput.** One miner process (uvicorn, 1 worker, the real app) is
   loaded with signed ``POST /NodeSynapse`` echo requests by an aiohttp load
   generator in another process. The generator signs requests in small batches
   just before sending them (fresh nonces, well inside the 10 s window) and keeps
   ``concurrency`` requests in flight. The same app with auth switched off is
   measured in the same run, so the ratio shows what signing costs the miner.
   The signed run then measures the same load again while an unauthenticated
   flood (``FLOOD``: never-finished heads, stalled bodies, a 96 MiB header sent
   over and over) hits the same miner: legitimate p50/p99 flooded beside quiet.
2. **One validation step** against ``miners`` local miners (256 by default, the
   largest subnet) using the ``good`` strategy on a v2 task family, a fresh hidden
   instance each step as a validator draws it. The miners are real apps on their own loopback
   ports, hosted by ``miner_processes`` child processes (each runs many uvicorn
   servers on one event loop); the validator runs in this process with the real
   client, its own execution of every plan (the reference tools playing the
   family's subnets on simulated time, ``engine/owned.py``, in the loop's
   worker pool) and the scorer. The step's records are then settled in a fresh
   validator state file, as the loop does. Reported: step wall time, its phases
   (query, execute, score, record), the share spent in the validator's own client,
   the validator's CPU time as a share of the wall time, and the share of miners
   whose S is exactly what ``dagnet run PLAN --task FAMILY --seed N`` gives for
   their plan. Target: within one 12 s block.

Children are this module run as ``python -m bench.network serve|load``
with a JSON spec on stdin; each run is bounded in requests and time and stops by
itself. Heavy imports sit inside the functions that need them, so each child
loads only its own side (a load generator never imports the miner or scorer).

On a shared machine the request rate alone says little, so the throughput run
also reports the CPU the miner and the generator used: the miner's CPU time per
request gives the rate one dedicated core would sustain.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from bench.flood import quantile
from protocol.metagraph import MetagraphSnapshot, Neuron
from protocol.synapse import NodeSynapse
from protocol.task import Task
from render.columns import ALWAYS, Column, fit_table

if TYPE_CHECKING:
    from tasks import Family

VALIDATOR_URI = "//dagnet-bench-validator"
MINER_URI = "//dagnet-bench-miner-{}"
TARGET_RPS = 3_000
BLOCK_S = 12.0
_CHILD_START_S = 60.0
_SIGN_BATCH = 64
_SATURATED = 0.9
FLOOD = {"stalled_heads": 256, "stalled_bodies": 64, "huge_header_mib": 96}
"""The unauthenticated flood held during the signed run's second measured phase."""


def run_network_bench(
    *,
    requests: int = 20_000,
    duration_s: float = 6.0,
    concurrency: int = 64,
    miners: int = 256,
    miner_processes: int = 2,
    repeats: int = 3,
    task_id: str | None = None,
    seed: int = 1,
) -> dict[str, Any]:
    """Run both measurements; returns plain JSON (medians and every repeat). The step runs
    family ``task_id`` (the first ``rag`` family by default) on the instances of seeds
    ``seed``, ``seed + 1``, ... (one per step)."""
    throughput = _throughput_bench(requests=requests, duration_s=duration_s, concurrency=concurrency, repeats=repeats)
    found = _bench_family(task_id)
    step = asyncio.run(_step_bench(found, seed, miners=miners, processes=miner_processes, repeats=repeats))
    return {"throughput": throughput, "step": step, "cpus": os.cpu_count()}


# ---------------------------------------------------------------- throughput


def _throughput_bench(*, requests: int, duration_s: float, concurrency: int, repeats: int) -> dict[str, Any]:
    from bittensor.sp_core import Keypair

    validator = Keypair.create_from_uri(VALIDATOR_URI)
    miner = Keypair.create_from_uri(MINER_URI.format(0))
    snapshot = _snapshot(validator.ss58_address, [miner.ss58_address])
    body = NodeSynapse.model_validate(
        {"task_id": "bench", "node_id": "n1", "subnet": "bench", "action": "echo", "params": {"text": "ping"}}
    )
    runs: dict[str, list[dict[str, Any]]] = {"signed": [], "unsigned": []}
    for _ in range(repeats):
        for mode, auth in (("signed", True), ("unsigned", False)):
            apps = [{"uri": MINER_URI.format(0), "auth": auth, "planner": "good"}]
            with serve_miners([apps], snapshot, provider_subnets={}, max_concurrency=concurrency) as fleets:
                spec = {
                    "url": fleets[0].urls[0],
                    "server_pid": fleets[0].pid,
                    "receiver": miner.ss58_address,
                    "signer_uri": VALIDATOR_URI,
                    "body": body.model_dump_json(),
                    "requests": requests,
                    "duration_s": duration_s,
                    "concurrency": concurrency,
                    "warmup": min(1_000, requests // 10),
                    "flood": FLOOD if auth else None,
                }
                runs[mode].append(_run_child("load", spec, timeout_s=2 * duration_s + _CHILD_START_S))
    signed, unsigned = (_median_run(runs[m]) for m in ("signed", "unsigned"))
    flooded = _median_run([run["flooded"] for run in runs["signed"]])
    return {
        "signed": signed,
        "unsigned": unsigned,
        "flooded": flooded,
        "flood": FLOOD,
        "signed_over_unsigned": signed["rps"] / unsigned["rps"] if unsigned["rps"] else None,
        "target_rps": TARGET_RPS,
        "meets_target": signed["rps"] >= TARGET_RPS,
        "concurrency": concurrency,
        "repeats": runs,
    }


def _median_run(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    keys = ("rps", "p50_ms", "p99_ms", "ok", "failed", "loader_cpu_share", "server_cpu_share", "server_cpu_us_per_req")
    median = {key: _median_or_none([run[key] for run in runs]) for key in keys}
    per_req = median["server_cpu_us_per_req"]
    median["server_capacity_rps"] = 1e6 / per_req if per_req else None
    return median


def _median_or_none(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


# ---------------------------------------------------------------- validation step


async def _step_bench(found: Family, seed: int, *, miners: int, processes: int, repeats: int) -> dict[str, Any]:
    from concurrent.futures import ThreadPoolExecutor

    from bittensor.sp_core import Keypair

    from engine.executor import ExecutorConfig
    from protocol.metagraph import Peer
    from subnets.owned import owned_runner
    from validator.client import ClientConfig, MinerClient
    from validator.loop import LoopConfig
    from validator.validation import OwnedExecution, validation_step

    validator = Keypair.create_from_uri(VALIDATOR_URI)
    uris = [MINER_URI.format(i) for i in range(miners)]
    hotkeys = [Keypair.create_from_uri(uri).ss58_address for uri in uris]
    snapshot = _snapshot(validator.ss58_address, hotkeys)
    groups = [[{"uri": uri, "auth": True, "planner": "good"} for uri in uris[p::processes]] for p in range(processes)]
    concurrency = LoopConfig().exec_concurrency
    with (
        serve_miners(groups, snapshot, provider_subnets={}, max_concurrency=256) as fleets,
        ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="owned-execution") as pool,
    ):
        peers = [
            Peer(uid=i + 1, hotkey=hotkeys[i], url=fleets[i % processes].urls[i // processes]) for i in range(miners)
        ]
        async with MinerClient(validator, config=ClientConfig(max_concurrency=512)) as client:
            steps = []
            with tempfile.TemporaryDirectory() as scratch:
                for block in range(repeats + 1):  # the first step also opens the connection pool
                    task = found.task(found.instance(seed + block))
                    cpu_before = _cpu_seconds(None)[0]
                    result = await validation_step(
                        task=task,
                        miners=peers,
                        client=client,
                        runner_factory=lambda package, _: owned_runner(task),  # noqa: B023  (called here, within the iteration)
                        executor_config=ExecutorConfig(),
                        exec_concurrency=concurrency,
                        owned=OwnedExecution(pool),
                    )
                    record_s = _settle(Path(scratch) / "state.sqlite", block, task, result)
                    summary = _step_summary(result, record_s, _cpu_seconds(None)[0] - cpu_before)
                    summary["same_as_dry_run"] = await _same_as_dry_run(task, result)
                    steps.append(summary)
    warm = steps[1:]
    median = {key: statistics.median(s[key] for s in warm) for key in warm[0] if isinstance(warm[0][key], (int, float))}
    return {
        "task_id": found.task_id,
        "task_type": found.task_type,
        "seeds": [seed, seed + repeats],
        "miners": miners,
        "miner_processes": processes,
        "execution": "owned",
        "exec_concurrency": concurrency,
        "median": median,
        "cold": steps[0],
        "repeats": warm,
        "block_s": BLOCK_S,
        "meets_target": median["wall_s"] < BLOCK_S,
        "load_avg_1m": os.getloadavg()[0],
    }


async def _same_as_dry_run(task: Task, result: Any) -> float:
    """The share of miners whose S is exactly the S ``dagnet run PLAN --task FAMILY --seed N``
    gives for its plan (each distinct plan run once)."""
    from bench.tasks import dry_run
    from protocol.documents import load_plan_document

    dry: dict[str, float] = {}
    same = 0
    for outcome in result.outcomes:
        if outcome.plan is None:
            continue
        key = json.dumps(outcome.plan, sort_keys=True)
        if key not in dry:
            report = await dry_run(load_plan_document(outcome.plan), task)
            dry[key] = report["score"]["S"]
        same += dry[key] == outcome.score.S
    return same / len(result.outcomes) if result.outcomes else 0.0


def _settle(path: Path, block: int, task: Task, result: Any) -> float:
    """Settle the step's records as the validator loop does; returns the seconds it took."""
    from validator.outcome import execution_record
    from validator.sampling import TaskDraw
    from validator.state import ValidatorState

    started = time.perf_counter()
    assert task.seed is not None  # a drawn instance carries its seed
    state = ValidatorState(path)
    try:
        state.settle_step(
            block, [execution_record(block, task, TaskDraw(task, task.seed, False), o) for o in result.outcomes]
        )
    finally:
        state.close()
    return time.perf_counter() - started


def _step_summary(result: Any, record_s: float, validator_cpu_s: float) -> dict[str, Any]:
    """The step's timings and shares; ``validator_cpu_s`` is this process's CPU time
    during the step and its settling (client, executor, scorer and state together;
    scorer threads included)."""
    t = result.timings
    wall = t.wall_s + record_s
    scores = [o.score.S for o in result.outcomes]
    return {
        "wall_s": wall,
        "query_s": t.query_s,
        "execute_s": t.execute_s,
        "score_s": t.score_s,
        "record_s": record_s,
        "client_own_s": t.client_own_s,
        "validator_cpu_s": validator_cpu_s,
        "query_share": t.query_s / wall,
        "client_own_share": t.client_own_s / wall,
        "validator_cpu_share": validator_cpu_s / wall,
        "mean_score": statistics.fmean(scores) if scores else 0.0,
        "invalid": sum(o.reason is not None for o in result.outcomes),
        "reasons": sorted({o.reason for o in result.outcomes if o.reason}),
    }


def _bench_family(task_id: str | None) -> Family:
    """The v2 family ``task_id``, else the first ``rag`` family."""
    from tasks import family, load_families

    if task_id is not None:
        return family(task_id)
    return next(found for found in load_families() if found.task_type == "rag")


def _snapshot(validator: str, miners: Sequence[str]) -> MetagraphSnapshot:
    neurons = [Neuron(uid=0, hotkey=validator, stake=10_000.0, validator_permit=True)]
    neurons += [Neuron(uid=i + 1, hotkey=hotkey) for i, hotkey in enumerate(miners)]
    return MetagraphSnapshot(netuid=1, block=1, neurons=tuple(neurons))


# ---------------------------------------------------------------- child processes (parent side)


@dataclass(frozen=True)
class _Fleet:
    """A child process hosting miner apps, one URL per app."""

    pid: int
    urls: list[str]


@contextmanager
def serve_miners(
    groups: Sequence[Sequence[dict[str, Any]]],
    snapshot: MetagraphSnapshot,
    *,
    provider_subnets: dict[str, Any],
    max_concurrency: int,
    server_limits: dict[str, Any] | None = None,
    open_files: int | None = None,
) -> Iterator[list[_Fleet]]:
    """One child per group of apps, all started before any is waited on; stopped on exit.

    Every app is served behind :mod:`miner.server`'s guard with ``server_limits``
    (``ServerLimits`` fields; its defaults when ``None``); ``open_files`` lowers the
    children's soft open-file limit.
    """
    from miner.metagraph import snapshot_to_dict

    with ExitStack() as stack:
        procs = [
            stack.enter_context(
                _child(
                    "serve",
                    {
                        "apps": list(apps),
                        "snapshot": snapshot_to_dict(snapshot),
                        "provider_subnets": provider_subnets,
                        "max_concurrency": max_concurrency,
                        "server_limits": server_limits or {},
                        "open_files": open_files,
                    },
                )
            )
            for apps in groups
        ]
        fleets = []
        for proc in procs:
            ports = json.loads(_read_line(proc, _CHILD_START_S))["ports"]
            fleets.append(_Fleet(proc.pid, [f"http://127.0.0.1:{port}" for port in ports]))
        yield fleets


@contextmanager
def _child(mode: str, spec: dict[str, Any]) -> Iterator[subprocess.Popen]:
    """``python -m bench.network <mode>`` fed ``spec``; closing stdin stops a server."""
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bench.network", mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
        assert proc.stdin is not None and proc.stdout is not None  # both PIPE above
        try:
            proc.stdin.write(json.dumps(spec).encode() + b"\n")
            proc.stdin.flush()
            yield proc
        except Exception as exc:
            errors.seek(0)
            raise RuntimeError(
                f"bench {mode} child failed: {exc}\n{errors.read()[-2000:].decode(errors='replace')}"
            ) from exc
        finally:
            proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _run_child(mode: str, spec: dict[str, Any], *, timeout_s: float) -> dict[str, Any]:
    with _child(mode, spec) as proc:
        return json.loads(_read_line(proc, timeout_s))


def _read_line(proc: subprocess.Popen, timeout_s: float) -> bytes:
    assert proc.stdout is not None  # a _child's stdout is a PIPE
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    line = proc.stdout.readline() if ready else b""
    if not line:
        raise RuntimeError(f"no answer within {timeout_s:g}s (exit code {proc.poll()})")
    return line


# ---------------------------------------------------------------- children


def _serve_main(spec: dict[str, Any]) -> None:
    """Host every app of ``spec`` on its own loopback port until stdin closes."""
    import uvicorn
    from bittensor.sp_core import Keypair

    from miner.app import create_app
    from miner.metagraph import StaticMetagraph, snapshot_from_json
    from miner.server import guarded_config
    from miner.serving import EVERY_TOOL
    from miner.settings import MinerSettings, RateLimit, ServerLimits
    from planners import load_planner
    from subnets.registry import default_registry

    if spec.get("open_files"):
        resource.setrlimit(resource.RLIMIT_NOFILE, (spec["open_files"], resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    limits = ServerLimits.model_validate(spec.get("server_limits", {}))
    metagraph = StaticMetagraph(snapshot_from_json(json.dumps(spec["snapshot"])))
    sockets, servers = [], []
    for app_spec in spec["apps"]:
        sock = socket.create_server(("127.0.0.1", 0), backlog=2048)
        settings = MinerSettings(
            port=sock.getsockname()[1],
            planner={"name": app_spec["planner"]},
            provider_subnets=spec["provider_subnets"],
            serve=EVERY_TOOL,
            rate_limit=RateLimit(per_second=1e9, burst=10**9),
            max_concurrency=spec["max_concurrency"],
        )
        app = create_app(
            settings,
            keypair=Keypair.create_from_uri(app_spec["uri"]),
            metagraph=metagraph,
            registry=default_registry(),
            planner=load_planner(app_spec["planner"]),
            auth_enabled=app_spec["auth"],
        )
        config = guarded_config(app, limits, log_level="warning", access_log=False, backlog=2048)
        sockets.append(sock)
        servers.append(uvicorn.Server(config))
    _answer({"ports": [sock.getsockname()[1] for sock in sockets]})
    _run_loop(_serve_until_stdin_closes(servers, sockets))


async def _serve_until_stdin_closes(servers: Sequence[Any], sockets: Sequence[socket.socket]) -> None:
    tasks = [asyncio.create_task(server.serve(sockets=[sock])) for server, sock in zip(servers, sockets)]
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)
    for server in servers:
        server.should_exit = True
    await asyncio.gather(*tasks)


def _load_main(spec: dict[str, Any]) -> None:
    _answer(_run_loop(_load(spec)))


async def _load(spec: dict[str, Any]) -> dict[str, Any]:
    """Keep ``concurrency`` signed requests in flight; count, time and bucket every answer.

    Also reports the CPU this generator and the server process (``server_pid``)
    used during the measured phase, so a reader can tell who was the bottleneck.
    """
    import aiohttp
    import yarl

    signer = _load_signer(spec)
    url = yarl.URL(spec["url"] + "/NodeSynapse")
    connector = aiohttp.TCPConnector(limit=spec["concurrency"], limit_per_host=spec["concurrency"])
    async with aiohttp.ClientSession(
        connector=connector, auto_decompress=False, skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding")
    ) as session:

        async def send(headers: dict[str, str]) -> int | str:
            try:
                async with session.post(url, data=signer.body, headers=headers) as resp:
                    await resp.read()
                    return resp.status
            except (aiohttp.ClientError, OSError) as exc:
                return type(exc).__name__

        await _load_phase(send, signer, spec["warmup"], spec)
        before = _cpu_seconds(spec.get("server_pid"))
        latencies, outcomes, elapsed = await _load_phase(send, signer, spec["requests"], spec)
        after = _cpu_seconds(spec.get("server_pid"))
        flooded = await _flooded_phase(send, signer, spec) if spec.get("flood") else None
    result = _phase_figures(latencies, outcomes, elapsed, before, after)
    if flooded is not None:
        result["flooded"] = flooded
    return result


async def _flooded_phase(send: Any, signer: _PresignedQueue, spec: dict[str, Any]) -> dict[str, Any]:
    """The same measured phase again, while an unauthenticated flood holds connections
    open and a 96 MiB header is sent over and over."""
    from bench import flood

    plan = spec["flood"]
    url = spec["url"]
    heads = await flood.stalled_heads(url, plan["stalled_heads"])
    bodies = await flood.stalled_bodies(url, plan["stalled_bodies"], declared=1024 * 1024, sent=512 * 1024)
    stop = asyncio.Event()

    async def huge_headers() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                await flood.huge_header(url, plan["huge_header_mib"] * 1024 * 1024)

    hammer = asyncio.create_task(huge_headers())
    try:
        before = _cpu_seconds(spec.get("server_pid"))
        latencies, outcomes, elapsed = await _load_phase(send, signer, spec["requests"], spec)
        after = _cpu_seconds(spec.get("server_pid"))
    finally:
        stop.set()
        await hammer
        heads.close()
        bodies.close()
    return _phase_figures(latencies, outcomes, elapsed, before, after)


def _phase_figures(
    latencies: list[float],
    outcomes: Counter,
    elapsed: float,
    before: tuple[float, float | None],
    after: tuple[float, float | None],
) -> dict[str, Any]:
    ok = outcomes.get(200, 0)
    loader_cpu = after[0] - before[0]  # this process: always read
    server_cpu = after[1] - before[1] if after[1] is not None and before[1] is not None else None
    return {
        "rps": ok / elapsed,
        "ok": ok,
        "failed": sum(outcomes.values()) - ok,
        "elapsed_s": elapsed,
        "p50_ms": 1e3 * quantile(latencies, 0.50),
        "p99_ms": 1e3 * quantile(latencies, 0.99),
        "outcomes": {str(key): value for key, value in outcomes.items()},
        "loader_cpu_share": loader_cpu / elapsed,
        "server_cpu_share": None if server_cpu is None else server_cpu / elapsed,
        "server_cpu_us_per_req": None if server_cpu is None or not ok else 1e6 * server_cpu / ok,
    }


class _PresignedQueue:
    """Signs ``_SIGN_BATCH`` requests at a time, just before they are sent."""

    def __init__(self, keypair: Any, receiver: str, body: bytes) -> None:
        self.body = body
        self._keypair, self._receiver = keypair, receiver
        self._queue: deque[dict[str, str]] = deque()
        self._last_nonce = 0

    def take(self) -> dict[str, str]:
        if not self._queue:
            self._refill()
        return self._queue.popleft()

    def _refill(self) -> None:
        import bittensor as bt

        for _ in range(_SIGN_BATCH):
            self._last_nonce = max(time.time_ns(), self._last_nonce + 1)
            headers = bt.http_auth.sign(
                self._keypair,
                method="POST",
                path="/NodeSynapse",
                body=self.body,
                receiver_ss58=self._receiver,
                nonce_ns=self._last_nonce,
            )
            headers["Content-Type"] = "application/json"
            self._queue.append(headers)


def _load_signer(spec: dict[str, Any]) -> _PresignedQueue:
    from bittensor.sp_core import Keypair

    return _PresignedQueue(Keypair.create_from_uri(spec["signer_uri"]), spec["receiver"], spec["body"].encode())


async def _load_phase(
    send: Any, signer: _PresignedQueue, count: int, spec: dict[str, Any]
) -> tuple[list[float], Counter, float]:
    latencies: list[float] = []
    outcomes: Counter = Counter()
    remaining = count
    started = time.perf_counter()
    stop_at = started + spec["duration_s"]

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0 and time.perf_counter() < stop_at:
            remaining -= 1
            headers = signer.take()
            sent = time.perf_counter()
            outcomes[await send(headers)] += 1
            latencies.append(time.perf_counter() - sent)

    await asyncio.gather(*(worker() for _ in range(spec["concurrency"])))
    latencies.sort()
    return latencies, outcomes, time.perf_counter() - started


def _cpu_seconds(pid: int | None) -> tuple[float, float | None]:
    """CPU seconds used so far by this process and by ``pid`` (Linux ``/proc``; else ``None``)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    own = usage.ru_utime + usage.ru_stime
    if pid is None:
        return own, None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return own, None
    return own, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _run_loop(coro: Any) -> Any:
    """Run on uvloop when installed (as uvicorn does), else asyncio's default loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


def _answer(payload: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(payload) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------- rendering


STEP_COLUMNS = (
    Column("wall s", lambda m: f"{m['wall_s']:.3f}", keep=ALWAYS),
    Column("query s", lambda m: f"{m['query_s']:.3f}", keep=8),
    Column("execute s", lambda m: f"{m['execute_s']:.3f}", keep=8),
    Column("score s", lambda m: f"{m['score_s']:.3f}", keep=5),
    Column("record s", lambda m: f"{m['record_s']:.3f}", keep=4),
    Column("query share", lambda m: f"{m['query_share']:.0%}", keep=2),
    Column("client own", lambda m: f"{m['client_own_share']:.1%}", keep=1),
    Column("validator CPU", lambda m: f"{m['validator_cpu_share']:.0%}", keep=7),
    Column("mean S", lambda m: f"{m['mean_score']:.3f}", keep=ALWAYS),
    Column("invalid", lambda m: f"{m['invalid']:g}", keep=6),
    Column("S = dry run", lambda m: f"{m['same_as_dry_run']:.0%}", keep=9),
)
"""The step table, most important columns kept when the terminal is narrow (render/columns.py)."""


def render_network_bench(result: dict[str, Any], console: Console) -> None:
    tp = result["throughput"]
    table = Table(title=f"One miner process, signed POST /NodeSynapse (concurrency {tp['concurrency']}, medians)")
    for column in (
        "auth",
        "req/s",
        "p50 ms",
        "p99 ms",
        "failed",
        "miner CPU",
        "µs CPU/req",
        "req/s per core",
        "loader CPU",
    ):
        table.add_column(column, justify="right")
    for mode in ("signed", "flooded", "unsigned"):
        run = tp[mode]
        table.add_row(
            "signed, under flood" if mode == "flooded" else mode,
            f"{run['rps']:,.0f}",
            f"{run['p50_ms']:.1f}",
            f"{run['p99_ms']:.1f}",
            f"{run['failed']:.0f}",
            _fmt(run["server_cpu_share"], "{:.0%}"),
            _fmt(run["server_cpu_us_per_req"], "{:.0f}"),
            _fmt(run["server_capacity_rps"], "{:,.0f}"),
            _fmt(run["loader_cpu_share"], "{:.0%}"),
        )
    console.print(table)
    signed, unsigned = tp["signed"], tp["unsigned"]
    verdict = "[green]meets[/green]" if tp["meets_target"] else "[red]misses[/red]"
    console.print(
        f"signed ÷ unsigned = {tp['signed_over_unsigned']:.2f}; {verdict} the {tp['target_rps']:,} req/s target"
    )
    f = tp["flood"]
    console.print(
        f"under flood ({f['stalled_heads']} never-finished heads, {f['stalled_bodies']} stalled unsigned bodies, "
        f"a {f['huge_header_mib']} MiB header sent over and over): p50 {tp['flooded']['p50_ms']:.1f} ms, "
        f"p99 {tp['flooded']['p99_ms']:.1f} ms, beside {signed['p50_ms']:.1f} / {signed['p99_ms']:.1f} ms quiet"
    )
    if signed["server_cpu_us_per_req"] and unsigned["server_cpu_us_per_req"]:
        extra = signed["server_cpu_us_per_req"] - unsigned["server_cpu_us_per_req"]
        console.print(f"auth costs the miner {extra:.0f} µs of CPU per request")
    if max(signed["server_cpu_share"] or 1, signed["loader_cpu_share"]) < _SATURATED:
        console.print(
            "[yellow]neither the miner nor the load generator saturated a core: the machine was "
            "busy with other work; read 'req/s per core'[/yellow]"
        )

    step = result["step"]
    m = step["median"]
    title = (
        f"One validation step: {step['miners']} miners in {step['miner_processes']} processes, "
        f"task {step['task_id']} ({step['task_type']}, instances of seeds "
        f"{step['seeds'][0]}–{step['seeds'][1]}), good strategy, owned execution, medians"
    )
    table = fit_table(STEP_COLUMNS, [m], console.width, title=title)
    console.print(table)
    verdict = "[green]inside[/green]" if step["meets_target"] else "[red]not inside[/red]"
    console.print(
        f"step {verdict} one {step['block_s']:g} s block (cold first step {step['cold']['wall_s']:.3f} s); "
        f"validator CPU {m['validator_cpu_s']:.2f} s per step; load average {step['load_avg_1m']:.1f} on "
        f"{result['cpus']} CPUs"
    )


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else spec.format(value)


if __name__ == "__main__":
    _mode = sys.argv[1] if len(sys.argv) > 1 else ""
    _spec = json.loads(sys.stdin.buffer.readline())
    {"serve": _serve_main, "load": _load_main}[_mode](_spec)
