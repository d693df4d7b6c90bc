"""`dagnet bench executor`: is the executor dependency-driven, and is it fast?

Two measurements on seeded random DAGs (edges only from lower to higher index,
about two predecessors per node, a few roots):

- **Makespan.** Every node is an ``echo`` with a log-normal ``delay_s`` (median
  20 ms, sigma 0.6), run through the real executor and :class:`LocalRunner`
  with parallelism not capped, so the only thing between the makespan and the
  critical path is the executor itself. Target: makespan ≤ 1.05 × CP + 10 ms.
  For contrast, the tier-barrier makespan of the same DAG (each Kahn level waits
  for its slowest node) is computed analytically.
- **Throughput.** A 10,000-node zero-delay DAG through a runner that returns at
  once, so nodes/s measures scheduling alone. Target: 100,000 nodes/s, and at
  least 0.9 × a bare ``graphlib`` + one-asyncio-task-per-node loop over the same
  DAG measured in the same run. The same DAG through LocalRunner + echo adds the
  tool's own cost; through **the ``dagnet run`` path** it is run as ``dagnet run
  PLAN`` runs a plan file (:func:`neurons.localrun.run_document` without a task):
  :func:`engine.evaluate.run_plan`, ``LocalRunner(default_registry())``, the
  default :class:`ExecutorConfig` and no event callback (the CLI builds a
  :class:`~engine.trace.RunTrace` only for ``--events`` or ``--html``). Target: at
  least 0.6 × the bare loop.
- **Frames.** One ``split`` generator emitting 1,000 frames, one every
  ``FRAME_GAP_S``, each run through two ``echo`` nodes in a chain (2,000 frame
  instances), their log-normal delays read from the frame itself. The critical
  path is the latest ``emit time + both delays`` over the frames; target:
  makespan ≤ 1.05 × CP. For contrast, the makespan if the frames' nodes waited for
  the generator to finish (last emit + slowest frame's chain) is computed too.

Every timing is wall clock around ``execute()`` (``run_plan()`` for the ``dagnet
run`` path; the plan check is done before, and the CLI's report is built after),
reported as the median of ``repeats`` runs, with a garbage collection before
each run so one run's garbage is not billed to the next. The throughput runs
take turns (bare loop, executor, LocalRunner + echo, ``dagnet run`` path, then
again), so the ratios compare runs made under the same load. Throughput is also
given per CPU second of this process, which other load on the machine does not
distort.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import graphlib
import math
import random
import statistics
import time
from collections.abc import Coroutine, Iterator
from dataclasses import replace
from typing import Any

from rich.console import Console
from rich.table import Table

from engine.evaluate import run_plan
from engine.executor import Execution, ExecutorConfig, execute
from protocol.graph import Graph
from protocol.limits import DEFAULT_LIMITS, Limits
from protocol.outcomes import RunStatus
from protocol.output import NodeOutput
from protocol.plan import WorkflowPlan
from protocol.runner import Emit, NodeCall, NodeResult, NodeRunner
from protocol.validation import PlanCheck, check_plan
from subnets.registry import default_registry
from subnets.runner import LocalRunner

__all__ = ["render_executor_bench", "run_executor_bench"]

MAKESPAN_RATIO_TARGET = 1.05
MAKESPAN_SLACK_S = 0.010
THROUGHPUT_TARGET = 100_000
OVER_BARE_TARGET = 0.9
"""Zero-delay executor ÷ the bare graphlib loop, measured in the same run."""
CLI_OVER_BARE_TARGET = 0.6
"""The ``dagnet run`` path (run_plan, LocalRunner + echo, no event callback) ÷ the bare loop."""

MEDIAN_LATENCY_S = 0.020
LATENCY_SIGMA = 0.6
MAX_CRITICAL_PATH_S = 1.5
"""Latencies are scaled down when a DAG's critical path would exceed this, so a run stays short."""
FRAMES = 1000
FRAME_GAP_S = 0.001
"""The generator makes one frame every this many seconds."""


def run_executor_bench(
    sizes: tuple[int, ...] = (10, 100, 1000),
    throughput_nodes: int = 10_000,
    seed: int = 0,
    repeats: int = 3,
    frames: int = FRAMES,
) -> dict[str, Any]:
    """Run the three measurements; returns a JSON-ready dict (see :func:`render_executor_bench`)."""
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    return asyncio.run(_bench(sizes, throughput_nodes, seed, repeats, frames))


async def _bench(sizes: tuple[int, ...], throughput_nodes: int, seed: int, repeats: int, frames: int) -> dict[str, Any]:
    makespans = [await _makespan_case(n, seed, repeats) for n in sizes]
    framed = await _frames_case(frames, seed, repeats)
    return {
        "seed": seed,
        "repeats": repeats,
        "targets": {
            "makespan_ratio": MAKESPAN_RATIO_TARGET,
            "makespan_slack_s": MAKESPAN_SLACK_S,
            "throughput_nodes_per_s": THROUGHPUT_TARGET,
            "over_graphlib_baseline": OVER_BARE_TARGET,
            "dagnet_run_over_graphlib_baseline": CLI_OVER_BARE_TARGET,
        },
        "makespan": makespans,
        "throughput": await _throughput_case(throughput_nodes, seed, repeats),
        "frames": framed,
    }


# -- random DAGs ----------------------------------------------------------------------


def _random_preds(n: int, rng: random.Random) -> list[list[int]]:
    """Predecessors per node: a few roots, then 1–3 (mean 2) picks from a recent window.

    The window keeps the DAG deep (tens of levels at 1000 nodes) rather than
    the logarithmic depth of picking from all earlier nodes.
    """
    roots = max(2, n // 100)
    window = max(8, n // 10)
    preds: list[list[int]] = [[] for _ in range(n)]
    for i in range(roots, n):
        low = max(0, i - window)
        picks = {rng.randrange(low, i) for _ in range(rng.randint(1, 3))}
        preds[i] = sorted(picks)
    return preds


def _plan(preds: list[list[int]], delays: list[float] | None) -> WorkflowPlan:
    """Echo nodes; with ``delays`` each node also quotes its first predecessor's text by DataRef."""
    nodes = []
    for i, node_preds in enumerate(preds):
        params: dict[str, Any] = {"text": f"n{i}"}
        if delays is not None:
            params["delay_s"] = delays[i]
            if node_preds:
                params["text"] = f"n{i}<${{n{node_preds[0]}.output.text}}"
        nodes.append({"id": f"n{i}", "subnet": "local", "action": "echo", "params": params})
    edges = [{"from": f"n{p}", "to": f"n{i}"} for i, node_preds in enumerate(preds) for p in node_preds]
    return WorkflowPlan.model_validate({"nodes": nodes, "edges": edges})


def _limits(n: int, edges: int) -> Limits:
    return replace(
        DEFAULT_LIMITS,
        max_nodes=max(n, DEFAULT_LIMITS.max_nodes),
        max_edges=max(edges, DEFAULT_LIMITS.max_edges),
    )


def _checked(plan: WorkflowPlan) -> tuple[PlanCheck, Limits]:
    limits = _limits(len(plan.nodes), len(plan.edges))
    check = check_plan(plan, limits=limits)
    if not check.valid:
        raise RuntimeError(f"benchmark DAG is invalid: {check.errors or check.node_errors}")
    return check, limits


def _tier_barrier_s(graph: Graph, delays: list[float]) -> float:
    """Makespan if each Kahn level started only when the previous one had all finished."""
    return sum(max(delays[graph.index[node_id]] for node_id in tier) for tier in graph.tiers())


# -- measurements ---------------------------------------------------------------------


@contextlib.contextmanager
def _settled_heap() -> Iterator[None]:
    """Collect, then freeze what the benchmark itself keeps alive (earlier cases,
    plans), so the collector's passes during a timed run scan only that run's own
    objects — as in a long-running validator that froze its start-up heap."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


async def _timed_run(
    plan: WorkflowPlan, runner: NodeRunner, check: PlanCheck, limits: Limits, parallel: int | None = None
) -> tuple[float, float]:
    """Wall-clock and process CPU seconds of one ``execute()``, parallelism not capped
    below ``parallel`` (the plan's node count by default)."""
    config = ExecutorConfig(max_parallel=parallel or len(plan.nodes))
    return await _timed(
        execute(
            plan,
            runner,
            task_id="bench",
            budget_ceiling=None,
            deadline_s=None,
            config=config,
            check=check,
            limits=limits,
        )
    )


async def _timed_dagnet_run(plan: WorkflowPlan, check: PlanCheck, limits: Limits) -> tuple[float, float]:
    """:func:`_timed_run` of the ``dagnet run PLAN`` path: what
    :func:`neurons.localrun.run_document` does without a task when the CLI is asked for
    the report only (no ``--events`` or ``--html``, so no ``RunTrace``; ``--max-nodes``
    raising the limits to the plan)."""
    return await _timed(
        run_plan(
            plan,
            check,
            LocalRunner(default_registry()),
            total_estimated_cost=None,
            config=ExecutorConfig(),
            limits=limits,
            on_event=None,
            inputs=None,
        )
    )


async def _timed(run: Coroutine[Any, Any, Execution]) -> tuple[float, float]:
    """Wall-clock and process CPU seconds of awaiting ``run``, on a settled heap."""
    with _settled_heap():
        wall, cpu = time.perf_counter(), time.process_time()
        execution = await run
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if execution.status != RunStatus.COMPLETED:
        raise RuntimeError(f"benchmark run ended {execution.status}")
    return wall, cpu


async def _makespan_case(n: int, seed: int, repeats: int) -> dict[str, Any]:
    rng = random.Random(f"{seed}:{n}")
    preds = _random_preds(n, rng)
    delays = [rng.lognormvariate(math.log(MEDIAN_LATENCY_S), LATENCY_SIGMA) for _ in range(n)]
    graph = Graph([f"n{i}" for i in range(n)], [(p, i) for i, ps in enumerate(preds) for p in ps])
    scale = min(1.0, MAX_CRITICAL_PATH_S / graph.critical_path(delays))
    delays = [round(d * scale, 6) for d in delays]
    critical = graph.critical_path(delays)
    plan = _plan(preds, delays)
    check, limits = _checked(plan)
    runner = LocalRunner(default_registry())
    runs = [(await _timed_run(plan, runner, check, limits))[0] for _ in range(repeats)]
    makespan = statistics.median(runs)
    barrier = _tier_barrier_s(graph, delays)
    return {
        "nodes": n,
        "edges": len(plan.edges),
        "tiers": len(check.tiers),
        "latency_scale": scale,
        "critical_path_s": critical,
        "makespan_s": makespan,
        "makespan_over_cp": makespan / critical,
        "tier_barrier_s": barrier,
        "tier_barrier_over_cp": barrier / critical,
        "meets_target": makespan <= MAKESPAN_RATIO_TARGET * critical + MAKESPAN_SLACK_S,
        "runs_s": runs,
    }


class _PacedFrames:
    """LocalRunner, except that a ``split`` node emits its items at their ``at`` times
    (seconds from the attempt's start), as a source producing them over time would."""

    __slots__ = ("_local",)

    def __init__(self) -> None:
        self._local = LocalRunner(default_registry())

    async def run(self, call: NodeCall) -> NodeResult:
        return await self._local.run(call)

    async def run_frames(self, call: NodeCall, emit: Emit) -> NodeResult:
        loop = asyncio.get_running_loop()
        start = loop.time()
        for index, item in enumerate(call.params["items"]):
            delay = start + item["at"] - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            emit(NodeOutput.model_validate({"text": str(index), "artifacts": {"metadata": {"item": item}}}))
        return NodeResult(NodeOutput(text=f"{len(call.params['items'])} frames"))


def _frames_plan(items: list[dict[str, float]]) -> WorkflowPlan:
    """g (split over ``items``) -> a -> b, a and b echoing after the frame's delays."""

    def echo(node_id: str, text: str) -> dict[str, Any]:
        params = {"text": text, "delay_s": "${g.output.artifacts.metadata.item.%s}" % node_id}
        return {"id": node_id, "subnet": "local", "action": "echo", "params": params}

    return WorkflowPlan.model_validate(
        {
            "nodes": [
                {"id": "g", "subnet": "local", "action": "split", "params": {"items": items}},
                echo("a", "${g.output.text}"),
                echo("b", "${a.output.text}"),
            ],
            "edges": [{"from": "g", "to": "a"}, {"from": "a", "to": "b"}],
        }
    )


async def _frames_case(frames: int, seed: int, repeats: int) -> dict[str, Any]:
    rng = random.Random(f"{seed}:frames:{frames}")
    items = [
        {
            "at": round(FRAME_GAP_S * i, 6),
            "a": round(rng.lognormvariate(math.log(MEDIAN_LATENCY_S), LATENCY_SIGMA), 6),
            "b": round(rng.lognormvariate(math.log(MEDIAN_LATENCY_S), LATENCY_SIGMA), 6),
        }
        for i in range(frames)
    ]
    critical = max(item["at"] + item["a"] + item["b"] for item in items)
    barrier = items[-1]["at"] + max(item["a"] + item["b"] for item in items)
    plan = _frames_plan(items)
    check, limits = _checked(plan)
    runs = [(await _timed_run(plan, _PacedFrames(), check, limits, parallel=2 * frames + 1))[0] for _ in range(repeats)]
    makespan = statistics.median(runs)
    return {
        "frames": frames,
        "instances": 2 * frames,
        "critical_path_s": critical,
        "makespan_s": makespan,
        "makespan_over_cp": makespan / critical,
        "generator_barrier_s": barrier,
        "generator_barrier_over_cp": barrier / critical,
        "meets_target": makespan <= MAKESPAN_RATIO_TARGET * critical,
        "runs_s": runs,
    }


class _InstantRunner:
    """Answers every node at once without suspending: isolates the executor's own cost."""

    __slots__ = ("_result",)

    def __init__(self) -> None:
        self._result = NodeResult(NodeOutput(text="ok"))

    async def run(self, call: NodeCall) -> NodeResult:
        return self._result


async def _graphlib_baseline_s(preds: list[list[int]], runner: NodeRunner) -> float:
    """The reference point: one bare asyncio task per node, scheduled by ``graphlib``.

    No budget, DataRefs, timeouts or records: what the simplest correct
    dependency-driven executor costs on this machine, measured in the same run. Like
    ``execute()``, which builds its node records and scheduler inside its timed window
    (only the plan check is done before), it is timed from the graph in hand: building
    the sorter and ``prepare()`` are inside the window.
    """
    pending: set[asyncio.Task[int]] = set()
    call = NodeCall("bench", "n", "local", "echo", {}, 30.0, 1)

    async def one(i: int) -> int:
        await runner.run(call)
        return i

    with _settled_heap():
        start = time.perf_counter()
        sorter = graphlib.TopologicalSorter({i: ps for i, ps in enumerate(preds)})
        sorter.prepare()
        while sorter.is_active():
            pending.update(asyncio.create_task(one(i)) for i in sorter.get_ready())
            finished, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in finished:
                sorter.done(task.result())
        return time.perf_counter() - start


async def _throughput_case(n: int, seed: int, repeats: int) -> dict[str, Any]:
    preds = _random_preds(n, random.Random(f"{seed}:throughput:{n}"))
    plan = _plan(preds, None)
    check, limits = _checked(plan)
    echo_runner = LocalRunner(default_registry())
    instant: list[tuple[float, float]] = []
    echo: list[float] = []
    cli: list[float] = []
    bare: list[float] = []
    for _ in range(repeats):  # one of each in turn, so a change in the machine's load falls on all alike
        bare.append(await _graphlib_baseline_s(preds, _InstantRunner()))
        instant.append(await _timed_run(plan, _InstantRunner(), check, limits))
        echo.append((await _timed_run(plan, echo_runner, check, limits))[0])
        cli.append((await _timed_dagnet_run(plan, check, limits))[0])
    rates = [n / wall for wall, _ in instant]
    rate = statistics.median(rates)
    baseline = statistics.median(n / wall for wall in bare)
    cli_rate = statistics.median(n / wall for wall in cli)
    return {
        "nodes": n,
        "edges": len(plan.edges),
        "nodes_per_s": rate,
        "runs_nodes_per_s": rates,
        "cpu_nodes_per_s": statistics.median(n / cpu for _, cpu in instant),
        "meets_target": rate >= THROUGHPUT_TARGET,
        "graphlib_task_per_node_nodes_per_s": baseline,
        "over_graphlib_baseline": rate / baseline,
        "meets_over_graphlib_target": rate / baseline >= OVER_BARE_TARGET,
        "local_echo_nodes_per_s": statistics.median(n / wall for wall in echo),
        "dagnet_run_nodes_per_s": cli_rate,
        "dagnet_run_over_graphlib_baseline": cli_rate / baseline,
        "meets_dagnet_run_target": cli_rate / baseline >= CLI_OVER_BARE_TARGET,
    }


# -- display --------------------------------------------------------------------------


def render_executor_bench(result: dict[str, Any], console: Console) -> None:
    """Print the makespan table and the throughput line of :func:`run_executor_bench`."""
    targets = result["targets"]
    table = Table(
        title=f"makespan vs critical path (median of {result['repeats']}, seed {result['seed']})",
        title_justify="left",
    )
    for column in ("nodes", "edges", "tiers", "critical path", "makespan", "÷ CP", "tier barrier ÷ CP", "target"):
        table.add_column(column, justify="right")
    for case in result["makespan"]:
        table.add_row(
            str(case["nodes"]),
            str(case["edges"]),
            str(case["tiers"]),
            f"{case['critical_path_s'] * 1000:.1f} ms",
            f"{case['makespan_s'] * 1000:.1f} ms",
            f"{case['makespan_over_cp']:.3f}",
            f"{case['tier_barrier_over_cp']:.3f}",
            _verdict(case["meets_target"]),
        )
    console.print(table)
    console.print(
        f"target: makespan ≤ {targets['makespan_ratio']} × CP + {targets['makespan_slack_s'] * 1000:.0f} ms",
        highlight=False,
    )
    tp = result["throughput"]
    console.print(
        f"throughput: {tp['nodes']} nodes, {tp['edges']} edges, zero delay: "
        f"{tp['nodes_per_s']:,.0f} nodes/s (target {targets['throughput_nodes_per_s']:,}) "
        f"{_verdict(tp['meets_target'])}; per CPU second {tp['cpu_nodes_per_s']:,.0f}; "
        f"graphlib + one task per node {tp['graphlib_task_per_node_nodes_per_s']:,.0f} nodes/s; "
        f"through LocalRunner + echo {tp['local_echo_nodes_per_s']:,.0f} nodes/s; "
        f"through the dagnet run path {tp['dagnet_run_nodes_per_s']:,.0f} nodes/s",
        highlight=False,
    )
    console.print(
        f"÷ bare loop (same run): executor {tp['over_graphlib_baseline']:.2f} "
        f"(target ≥ {targets['over_graphlib_baseline']}) {_verdict(tp['meets_over_graphlib_target'])}; "
        f"dagnet run path {tp['dagnet_run_over_graphlib_baseline']:.2f} "
        f"(target ≥ {targets['dagnet_run_over_graphlib_baseline']}) {_verdict(tp['meets_dagnet_run_target'])}",
        highlight=False,
    )
    fr = result["frames"]
    console.print(
        f"frames: 1 generator × {fr['frames']} frames × 2 nodes ({fr['instances']} instances): makespan "
        f"{fr['makespan_s'] * 1000:.1f} ms, critical path {fr['critical_path_s'] * 1000:.1f} ms, "
        f"÷ CP {fr['makespan_over_cp']:.3f} (target ≤ {targets['makespan_ratio']}) {_verdict(fr['meets_target'])}; "
        f"waiting for the generator to finish would be ÷ CP {fr['generator_barrier_over_cp']:.3f}",
        highlight=False,
    )


def _verdict(ok: bool) -> str:
    return "[green]ok[/green]" if ok else "[red]MISSED[/red]"
