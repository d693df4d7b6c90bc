"""One run as a self-contained HTML page: the plan's DAG, a timeline, the score.

:func:`render_run_page` draws a run report (:func:`engine.report.run_report`),
the plan it ran and the lifecycle transitions of the run (:mod:`engine.trace`)
as one HTML file with inline SVG, CSS and a few lines of script. It fetches
nothing: a Content-Security-Policy forbids every network load, and the only
script allowed is the page's own (pinned by its hash).

What it shows:

- the DAG, laid out by Kahn levels, each node coloured by its final status;
- a Gantt chart, one row per node, and under a frame-scoped node one row per
  frame instance (the first :data:`MAX_INSTANCE_ROWS`): the wait between ``ready`` and ``running``,
  one segment per attempt (green when it succeeded, red when it failed; a
  single bar when the report has no attempt times), and a marker with the reason for a node that was
  blocked or aborted without running;
- the critical path *of this run* — the longest chain, through edges, of the
  measured run times — outlined in both drawings;
- every failed attempt's error, node by node (and the reason of a node that failed
  without one), in a table of its own — not only in a tooltip;
- the task and the instance seed, when the run had a task, so it can be replayed;
- the score breakdown (each component and its weighted share of ``S``), when the
  run was scored, and the final output.

Everything a plan or a tool supplied is escaped; the page is safe to open.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from protocol.graph import CycleError, Graph
from protocol.plan import WorkflowPlan
from protocol.score_weights import W_COST, W_LATENCY, W_RELIABILITY, W_SUCCESS

from .runchart import (
    COLOURS,
    MAX_DAG_NODES,
    MAX_INSTANCE_ROWS,
    NOT_RUN,
    Row,
    clip,
    dag_section,
    esc,
    gantt_section,
    num,
    status_colour,
)

__all__ = ["MAX_DAG_NODES", "MAX_FAILURE_ROWS", "MAX_INSTANCE_ROWS", "render_run_page"]

MAX_FAILURE_ROWS = 200
"""Failed attempts listed; the rest are counted in a note."""

_OUTPUT_CHARS = 4000
_WEIGHTS = (
    ("S_success", W_SUCCESS, "#2e7d32"),
    ("S_cost", W_COST, "#1565c0"),
    ("S_latency", W_LATENCY, "#00838f"),
    ("S_reliability", W_RELIABILITY, "#6a1b9a"),
)

# Hovering a node in either drawing highlights it in both.
_SCRIPT = """
document.querySelectorAll('[data-node]').forEach(function (el) {
  var id = el.getAttribute('data-node');
  function mark(on) {
    document.querySelectorAll('[data-node]').forEach(function (other) {
      if (other.getAttribute('data-node') === id) other.classList.toggle('hl', on);
    });
  }
  el.addEventListener('mouseenter', function () { mark(true); });
  el.addEventListener('mouseleave', function () { mark(false); });
});
document.body.setAttribute('data-ready', '1');
"""
_SCRIPT_HASH = base64.b64encode(hashlib.sha256(_SCRIPT.encode()).digest()).decode()
_CSP = f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{_SCRIPT_HASH}'"

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #212121; background: #fff; }
h1 { font-size: 20px; margin: 0 0 8px; } h2 { font-size: 16px; margin: 28px 0 8px; }
table { border-collapse: collapse; } td, th { padding: 2px 10px 2px 0; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.status { font-weight: 600; } .err { color: #c62828; }
.legend span { display: inline-block; margin-right: 14px; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -1px; }
pre { background: #f5f5f5; padding: 8px; white-space: pre-wrap; max-width: 1100px; }
svg text { font: 11px system-ui, sans-serif; }
.hl rect, rect.hl { stroke: #ff6f00 !important; stroke-width: 3 !important; }
.crit { stroke: #000; stroke-width: 2.5; }
"""


def render_run_page(
    plan: WorkflowPlan,
    report: Mapping[str, Any],
    events: Iterable[Mapping[str, Any]] = (),
    *,
    title: str = "dagnet run",
) -> str:
    """The page for one run. ``events`` are :mod:`engine.trace` records, in order."""
    rows = _rows(plan, report, events)
    graph = _graph(plan)
    critical = _critical(graph, rows) if graph is not None else []
    parts = [
        _head(title),
        _summary(report, critical),
        dag_section(plan, graph, rows, set(critical)),
        gantt_section(graph, rows, set(critical)),
        _failures_section(rows),
        _score_section(report.get("score")),
        _output_section(report),
        f"<script>{_SCRIPT}</script></body></html>\n",
    ]
    return "".join(parts)


# -- data -------------------------------------------------------------------------------


def _rows(plan: WorkflowPlan, report: Mapping[str, Any], events: Iterable[Mapping[str, Any]]) -> dict[str, Row]:
    """One row per node (by id), its frame instances' rows under it."""
    nodes = report.get("nodes") or {}
    rows: dict[str, Row] = {}
    instances: dict[tuple[str, int], Row] = {}
    row: Row | None  # an event's row may be missing
    for node in plan.nodes:
        record = nodes.get(node.id) or {}
        row = rows[node.id] = _row(node.id, node.action, record)
        shown = (record.get("instances") or ())[:MAX_INSTANCE_ROWS]
        row.instances = [_row(node.id, node.action, inst) for inst in shown]
        row.hidden = len(record.get("instances") or ()) - len(shown)
        instances.update(((node.id, inst.frame), inst) for inst in row.instances)  # type: ignore[misc]
    for event in events:
        frame = event.get("frame")
        row = rows.get(event.get("node", "")) if frame is None else instances.get((event.get("node", ""), frame))
        if row is None:
            continue
        to, t = event.get("to"), event.get("t")
        if to == "ready":
            row.ready = t
        elif to == "running" and row.started is None:
            row.started = t
        elif to in COLOURS:
            row.settled = t
    return rows


def _row(node_id: str, action: str, record: Mapping[str, Any]) -> Row:
    return Row(
        node_id,
        action,
        record.get("status", "pending"),
        record.get("reason"),
        int(record.get("attempts") or 0),
        record.get("frame"),
        started=record.get("started_s"),
        finished=record.get("finished_s"),
        spans=[(a["started_s"], a["finished_s"], a.get("error")) for a in record.get("attempt_log", ())],
    )


def _graph(plan: WorkflowPlan) -> Graph | None:
    """The plan's graph, or None when it is not one (an invalid plan)."""
    ids = [node.id for node in plan.nodes]
    index = {node_id: i for i, node_id in enumerate(ids)}
    if len(index) != len(ids):
        return None
    try:
        graph = Graph(ids, [(index[e.source], index[e.to]) for e in plan.edges])
        graph.topo_order()
    except (KeyError, CycleError):
        return None
    return graph


def _run_time(row: Row) -> float:
    if row.started is None or row.finished is None:
        return 0.0
    return max(0.0, row.finished - row.started)


def _critical(graph: Graph, rows: Mapping[str, Row]) -> list[str]:
    """The longest chain of measured run times through edges (empty if nothing ran)."""
    length, path = graph.longest_path([_run_time(rows[node_id]) for node_id in graph.ids])
    return [graph.ids[i] for i in path] if length > 0 else []


# -- page sections ---------------------------------------------------------------------


def _head(title: str) -> str:
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        f"<title>{esc(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{esc(title)}</h1>"
    )


def _summary(report: Mapping[str, Any], critical: Sequence[str]) -> str:
    status = report.get("status", "?")
    ceiling = report.get("budget_ceiling")
    lines = [
        ("status", f'<span class="status" style="color:{status_colour(status)}">{esc(status)}</span>'),
        (
            "completed",
            esc(
                f"{report.get('steps_completed', 0)}/{report.get('total_steps', 0)} steps "
                f"(completion_ratio {num(report.get('completion_ratio'))})"
            ),
        ),
        (
            "latency",
            esc(f"{num(report.get('latency_s'))} s (planned critical path {num(report.get('critical_path_s'))} s)"),
        ),
        ("cost", esc(f"{num(report.get('cost_tao'))} τ (ceiling {'none' if ceiling is None else num(ceiling)})")),
        (
            "retries",
            esc(
                f"{report.get('retries', 0)} planned, {report.get('unplanned_retries', 0)} unplanned, "
                f"{report.get('timeouts', 0)} timeouts, {report.get('hard_failures', 0)} hard failures"
            ),
        ),
        ("critical path", esc(" → ".join(critical) or "none")),
        *_task_lines(report),
    ]
    body = "".join(f"<tr><th>{name}</th><td>{value}</td></tr>" for name, value in lines)
    errors = "".join(f'<p class="err">error: {esc(e)}</p>' for e in report.get("errors") or ())
    return f'<table class="summary">{body}</table>{errors}{_legend()}'


def _task_lines(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The task and its instance seed, when the run had a task: what replaying it takes."""
    task_id = report.get("task_id")
    if task_id is None:
        return []
    seed = report.get("seed")
    replay = f"--task {task_id}" + (f" --seed {seed}" if seed is not None else "")
    return [
        ("task", esc(task_id)),
        ("seed", esc("none" if seed is None else seed)),
        ("replay", f"<code>dagnet run PLAN {esc(replay)}</code>"),
    ]


def _legend() -> str:
    items = [*COLOURS.items(), ("not run", NOT_RUN)]
    spans = "".join(f'<span><i style="background:{c}"></i>{esc(s)}</span>' for s, c in items)
    return f'<p class="legend">{spans}<span><i style="border:2.5px solid #000"></i>critical path</span></p>'


# -- failures ---------------------------------------------------------------------------------


def _failures(rows: Mapping[str, Row]) -> list[tuple[str, str, str]]:
    """(node, attempt, error) for every failed attempt, and a failed node's reason when no
    attempt carries one (a node that failed before it ran)."""
    found = []
    for row in rows.values():
        for r in (row, *row.instances):
            errors = [(str(n), failure) for n, (_, _, failure) in enumerate(r.spans, 1) if failure is not None]
            if not errors and r.status == "failed" and r.reason:
                errors = [("-", r.reason)]
            found += [(r.label, attempt, failure) for attempt, failure in errors]
    return found


def _failures_section(rows: Mapping[str, Row]) -> str:
    failures = _failures(rows)
    if not failures:
        return "<h2>Failed attempts</h2><p>none</p>"
    shown = failures[:MAX_FAILURE_ROWS]
    body = "".join(
        f'<tr><td>{esc(label)}</td><td class="num">{esc(attempt)}</td><td class="err">{esc(failure)}</td></tr>'
        for label, attempt, failure in shown
    )
    more = f"<p>… and {len(failures) - len(shown)} more</p>" if len(failures) > len(shown) else ""
    return (
        f'<h2>Failed attempts</h2><table id="failures"><tr><th>node</th><th>attempt</th><th>error</th></tr>'
        f"{body}</table>{more}"
    )


# -- score and output -------------------------------------------------------------------------


def _score_section(score: Mapping[str, Any] | None) -> str:
    if not score:
        return "<h2>Score</h2><p>Not scored (run with a task to score it).</p>"
    rows = []
    for key in ("S", "output_quality", "completion_ratio", *(name for name, _, _ in _WEIGHTS)):
        rows.append(f'<tr><th>{key}</th><td class="num">{num(score.get(key))}</td></tr>')
    return (
        f"<h2>Score</h2><table>{''.join(rows)}</table>{_score_bar(score)}"
        f"<pre>{esc(json.dumps(score.get('details', {}), indent=1, default=str))}</pre>"
    )


def _score_bar(score: Mapping[str, Any]) -> str:
    """S as a stacked bar: each component's weighted share, on a scale of 0..1."""
    width, x = 600.0, 0.0
    parts = []
    for name, weight, colour in _WEIGHTS:
        value = score.get(name)
        if not isinstance(value, (int, float)):
            continue
        w = max(0.0, weight * value) * width
        parts.append(
            f'<rect class="share" x="{x:.1f}" y="0" width="{w:.1f}" height="20" fill="{colour}">'
            f"<title>{esc(f'{weight} × {name} = {weight * value:.4f}')}</title></rect>"
        )
        x += w
    legend = " ".join(f'<span><i style="background:{c}"></i>{w} × {n}</span>' for n, w, c in _WEIGHTS)
    return (
        f'<svg id="score" width="{width + 2:.0f}" height="22" xmlns="http://www.w3.org/2000/svg">'
        f'<rect x="0" y="0" width="{width}" height="20" fill="#f5f5f5" stroke="#bdbdbd"/>'
        + "".join(parts)
        + f'</svg><p class="legend">{legend}</p>'
    )


def _output_section(report: Mapping[str, Any]) -> str:
    output = report.get("final_output")
    if not isinstance(output, Mapping):
        return "<h2>Final output</h2><p>none</p>"
    text = str(output.get("text", ""))
    code = (output.get("artifacts") or {}).get("code") or ""
    source = esc(report.get("output_node") or "?")
    body = f"<pre>{esc(clip(text, _OUTPUT_CHARS))}</pre>"
    if code:
        body += f"<pre>{esc(clip(str(code), _OUTPUT_CHARS))}</pre>"
    return f"<h2>Final output (from {source})</h2>{body}"
