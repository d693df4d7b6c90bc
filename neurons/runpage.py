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
import html
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from protocol.graph import CycleError, Graph
from protocol.outcomes import RunStatus
from protocol.plan import WorkflowPlan
from scoring.composite import W_COST, W_LATENCY, W_RELIABILITY, W_SUCCESS

__all__ = ["MAX_DAG_NODES", "MAX_FAILURE_ROWS", "MAX_INSTANCE_ROWS", "render_run_page"]

MAX_DAG_NODES = 400
"""Larger plans get the timeline only: a DAG drawing of them is unreadable anyway."""
MAX_INSTANCE_ROWS = 100
"""Frame instances drawn under their node; the rest are counted in a note."""
MAX_FAILURE_ROWS = 200
"""Failed attempts listed; the rest are counted in a note."""

_OUTPUT_CHARS = 4000
_LABEL_CHARS = 26
_COLOURS = {
    "success": "#2e7d32",
    "failed": "#c62828",
    "blocked": "#f9a825",
    "budget_abort": "#8e24aa",
}
_NOT_RUN = "#9e9e9e"
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
_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    f"script-src 'sha256-{_SCRIPT_HASH}'"
)

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


@dataclass
class _Row:
    """What the page knows about one node's run; times in seconds from the start."""

    node_id: str
    action: str
    status: str
    reason: str | None
    attempts: int
    frame: int | None = None
    ready: float | None = None
    started: float | None = None
    finished: float | None = None
    settled: float | None = None
    spans: list[tuple[float, float, str | None]] = field(default_factory=list)  # per attempt: start, end, error
    instances: list[_Row] = field(default_factory=list)  # a frame-scoped node's, drawn under it
    hidden: int = 0  # instances beyond MAX_INSTANCE_ROWS

    @property
    def label(self) -> str:
        return self.node_id if self.frame is None else f"{self.node_id}[{self.frame}]"


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
        _dag_section(plan, graph, rows, set(critical)),
        _gantt_section(graph, rows, set(critical)),
        _failures_section(rows),
        _score_section(report.get("score")),
        _output_section(report),
        f"<script>{_SCRIPT}</script></body></html>\n",
    ]
    return "".join(parts)


# -- data -------------------------------------------------------------------------------


def _rows(plan: WorkflowPlan, report: Mapping[str, Any], events: Iterable[Mapping[str, Any]]) -> dict[str, _Row]:
    """One row per node (by id), its frame instances' rows under it."""
    nodes = report.get("nodes") or {}
    rows: dict[str, _Row] = {}
    instances: dict[tuple[str, int], _Row] = {}
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
        elif to in _COLOURS:
            row.settled = t
    return rows


def _row(node_id: str, action: str, record: Mapping[str, Any]) -> _Row:
    return _Row(
        node_id, action, record.get("status", "pending"), record.get("reason"),
        int(record.get("attempts") or 0), record.get("frame"), started=record.get("started_s"),
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


def _run_time(row: _Row) -> float:
    if row.started is None or row.finished is None:
        return 0.0
    return max(0.0, row.finished - row.started)


def _critical(graph: Graph, rows: Mapping[str, _Row]) -> list[str]:
    """The longest chain of measured run times through edges (empty if nothing ran)."""
    length, path = graph.longest_path([_run_time(rows[node_id]) for node_id in graph.ids])
    return [graph.ids[i] for i in path] if length > 0 else []


def _horizon(rows: Iterable[_Row]) -> float:
    times = [t for row in rows for r in (row, *row.instances) for t in (r.ready, r.started, r.finished, r.settled)
             if t is not None]
    return max(times, default=0.0) or 1e-3


# -- page sections ---------------------------------------------------------------------


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _head(title: str) -> str:
    return (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{_CSP}\">"
        f"<title>{_esc(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{_esc(title)}</h1>"
    )


def _summary(report: Mapping[str, Any], critical: Sequence[str]) -> str:
    status = report.get("status", "?")
    ceiling = report.get("budget_ceiling")
    lines = [
        ("status", f"<span class=\"status\" style=\"color:{_status_colour(status)}\">{_esc(status)}</span>"),
        ("completed", _esc(f"{report.get('steps_completed', 0)}/{report.get('total_steps', 0)} steps "
                           f"(completion_ratio {_num(report.get('completion_ratio'))})")),
        ("latency", _esc(f"{_num(report.get('latency_s'))} s (planned critical path "
                         f"{_num(report.get('critical_path_s'))} s)")),
        ("cost", _esc(f"{_num(report.get('cost_tao'))} τ (ceiling {'none' if ceiling is None else _num(ceiling)})")),
        ("retries", _esc(f"{report.get('retries', 0)} planned, {report.get('unplanned_retries', 0)} unplanned, "
                         f"{report.get('timeouts', 0)} timeouts, {report.get('hard_failures', 0)} hard failures")),
        ("critical path", _esc(" → ".join(critical) or "none")),
        *_task_lines(report),
    ]
    body = "".join(f"<tr><th>{name}</th><td>{value}</td></tr>" for name, value in lines)
    errors = "".join(f"<p class=\"err\">error: {_esc(e)}</p>" for e in report.get("errors") or ())
    return f"<table class=\"summary\">{body}</table>{errors}{_legend()}"


def _task_lines(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The task and its instance seed, when the run had a task: what replaying it takes."""
    task_id = report.get("task_id")
    if task_id is None:
        return []
    seed = report.get("seed")
    replay = f"--task {task_id}" + (f" --seed {seed}" if seed is not None else "")
    return [("task", _esc(task_id)), ("seed", _esc("none" if seed is None else seed)),
            ("replay", f"<code>dagnet run PLAN {_esc(replay)}</code>")]


def _legend() -> str:
    items = [*_COLOURS.items(), ("not run", _NOT_RUN)]
    spans = "".join(f"<span><i style=\"background:{c}\"></i>{_esc(s)}</span>" for s, c in items)
    return f"<p class=\"legend\">{spans}<span><i style=\"border:2.5px solid #000\"></i>critical path</span></p>"


def _status_colour(status: str) -> str:
    return _COLOURS.get(status, {RunStatus.COMPLETED: _COLOURS["success"], RunStatus.PARTIAL: _COLOURS["blocked"],
                                 RunStatus.INVALID: _COLOURS["failed"]}.get(status, _NOT_RUN))


def _num(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "–"


# -- the DAG ----------------------------------------------------------------------------

_BOX_W, _BOX_H, _COL_W, _ROW_H, _PAD = 150, 30, 200, 44, 10


def _dag_section(plan: WorkflowPlan, graph: Graph | None, rows: Mapping[str, _Row], critical: set[str]) -> str:
    if graph is None:
        return "<h2>Plan</h2><p>The plan is not a valid graph; nothing to draw.</p>"
    if len(graph.ids) > MAX_DAG_NODES:
        return f"<h2>Plan</h2><p>{len(graph.ids)} nodes: too many to draw; the timeline lists every node.</p>"
    at = _layout(graph)
    width = max(x for x, _ in at.values()) + _BOX_W + 2 * _PAD
    height = max(y for _, y in at.values()) + _BOX_H + 2 * _PAD
    edges = []
    for src, succs in enumerate(graph.succs):
        for dst in succs:
            a, b = graph.ids[src], graph.ids[dst]
            edges.append(_edge(at[a], at[b], a in critical and b in critical))
    boxes = [_box(at[node_id], rows[node_id], node_id in critical) for node_id in graph.ids]
    return (
        f"<h2>Plan</h2><svg id=\"dag\" width=\"{width}\" height=\"{height}\" "
        f"viewBox=\"0 0 {width} {height}\" xmlns=\"http://www.w3.org/2000/svg\">"
        "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"6\" "
        "markerHeight=\"6\" orient=\"auto\"><path d=\"M0,0L10,5L0,10z\" fill=\"#616161\"/></marker></defs>"
        + "".join(edges) + "".join(boxes) + "</svg>"
    )


def _layout(graph: Graph) -> dict[str, tuple[float, float]]:
    """Columns by Kahn level; rows ordered by the mean row of each node's predecessors."""
    row_of: dict[int, float] = {}
    at: dict[str, tuple[float, float]] = {}
    for column, tier in enumerate(graph.tiers()):
        members = [graph.index[node_id] for node_id in tier]
        place = {v: n for n, v in enumerate(members)}
        members.sort(key=lambda v: _mean([row_of[p] for p in graph.preds[v]], default=place[v]))
        for row, v in enumerate(members):
            row_of[v] = row
            at[graph.ids[v]] = (_PAD + column * _COL_W, _PAD + row * _ROW_H)
    return at


def _mean(values: Sequence[float], *, default: float) -> float:
    return sum(values) / len(values) if values else default


def _edge(a: tuple[float, float], b: tuple[float, float], critical: bool) -> str:
    x1, y1 = a[0] + _BOX_W, a[1] + _BOX_H / 2
    x2, y2 = b[0], b[1] + _BOX_H / 2
    mid = (x1 + x2) / 2
    stroke = "class=\"crit\"" if critical else "stroke=\"#9e9e9e\" stroke-width=\"1.2\""
    return (f"<path d=\"M{x1:.1f},{y1:.1f} C{mid:.1f},{y1:.1f} {mid:.1f},{y2:.1f} {x2:.1f},{y2:.1f}\" "
            f"fill=\"none\" {stroke} marker-end=\"url(#arrow)\"/>")


def _box(at: tuple[float, float], row: _Row, critical: bool) -> str:
    x, y = at
    colour = _COLOURS.get(row.status, _NOT_RUN)
    tip = f"{row.node_id} ({row.action}): {row.status}" + (f" — {row.reason}" if row.reason else "")
    outline = ' class="crit"' if critical else ""
    return (
        f"<g data-node=\"{_esc(row.node_id)}\"><title>{_esc(tip)}</title>"
        f"<rect x=\"{x}\" y=\"{y}\" width=\"{_BOX_W}\" height=\"{_BOX_H}\" rx=\"5\" fill=\"{colour}\" "
        f"fill-opacity=\"0.18\" stroke=\"{colour}\"{outline}/>"
        f"<text x=\"{x + 6}\" y=\"{y + 13}\">{_esc(_clip(row.node_id, 22))}</text>"
        f"<text x=\"{x + 6}\" y=\"{y + 25}\" fill=\"#616161\">{_esc(_clip(row.action, 22))}</text></g>"
    )


# -- the timeline -------------------------------------------------------------------------

_LABEL_W, _PLOT_W, _BAR_H, _LINE_H, _AXIS_H = 200, 880, 12, 18, 24


def _gantt_section(graph: Graph | None, rows: Mapping[str, _Row], critical: set[str]) -> str:
    order = [graph.ids[i] for i in graph.topo_order()] if graph is not None else list(rows)
    lines = [line for node_id in order for line in _lines(rows[node_id], node_id in critical)]
    horizon = _horizon(rows.values())
    scale = _PLOT_W / horizon
    height = _AXIS_H + len(lines) * _LINE_H + _PAD
    width = _LABEL_W + _PLOT_W + 60
    body = [_axis(horizon, scale, height)]
    for n, (line, on_path) in enumerate(lines):
        y = _AXIS_H + n * _LINE_H
        if isinstance(line, _Row):
            body.append(_gantt_row(line, y, scale, on_path))
        else:
            body.append(f"<text x=\"14\" y=\"{y + _BAR_H - 2}\" fill=\"#616161\">{_esc(line)}</text>")
    return (
        f"<h2>Timeline</h2><svg id=\"gantt\" width=\"{width}\" height=\"{height}\" "
        f"viewBox=\"0 0 {width} {height}\" xmlns=\"http://www.w3.org/2000/svg\">" + "".join(body) + "</svg>"
    )


def _lines(row: _Row, critical: bool) -> list[tuple[_Row | str, bool]]:
    """A node's timeline lines: its own, its instances', and a note for those not drawn."""
    lines: list[tuple[_Row | str, bool]] = [(row, critical), *((inst, False) for inst in row.instances)]
    if row.hidden:
        lines.append((f"… and {row.hidden} more instances of {row.node_id}", False))
    return lines


def _ticks(horizon: float) -> list[float]:
    raw = horizon / 8
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return [k * step for k in range(int(horizon / step) + 1)]


def _axis(horizon: float, scale: float, height: float) -> str:
    parts = []
    for t in _ticks(horizon):
        x = _LABEL_W + t * scale
        parts.append(f"<line x1=\"{x:.1f}\" y1=\"{_AXIS_H - 6}\" x2=\"{x:.1f}\" y2=\"{height}\" stroke=\"#eeeeee\"/>"
                     f"<text x=\"{x:.1f}\" y=\"{_AXIS_H - 10}\" text-anchor=\"middle\" fill=\"#616161\">{t:.4g}s</text>")
    return "".join(parts)


def _gantt_row(row: _Row, y: float, scale: float, critical: bool) -> str:
    x0 = _LABEL_W
    label = ("★ " if critical else "") + ("  ↳ " if row.frame is not None else "") + _clip(row.label, _LABEL_CHARS)
    weight = " font-weight=\"700\"" if critical else ""
    parts = [f"<g data-node=\"{_esc(row.node_id)}\"><title>{_esc(_row_tip(row))}</title>"
             f"<text x=\"4\" y=\"{y + _BAR_H - 2}\"{weight}>{_esc(label)}</text>"]
    mid = y + _BAR_H / 2
    if row.ready is not None and row.started is not None and row.started > row.ready:
        parts.append(f"<line x1=\"{x0 + row.ready * scale:.1f}\" y1=\"{mid}\" x2=\"{x0 + row.started * scale:.1f}\" "
                     f"y2=\"{mid}\" stroke=\"#bdbdbd\" stroke-dasharray=\"2,2\"/>")
    colour = _COLOURS.get(row.status, _NOT_RUN)
    if row.started is not None:
        end = row.finished if row.finished is not None else row.settled or row.started
        if row.spans:
            parts += [_attempt_bar(x0, y, scale, span, critical) for span in row.spans]
        else:
            parts.append(_bar(x0 + row.started * scale, y, max(2.0, (end - row.started) * scale), colour, critical))
        if row.attempts > 1:
            parts.append(f"<text x=\"{x0 + end * scale + 4:.1f}\" y=\"{y + _BAR_H - 2}\">×{row.attempts}</text>")
    else:
        t = row.settled if row.settled is not None else 0.0
        x = x0 + t * scale
        note = _clip(f"{row.status}: {row.reason or ''}", 60)
        parts.append(f"<path class=\"marker\" d=\"M{x:.1f},{y}l6,6l-6,6l-6,-6z\" fill=\"{colour}\"/>"
                     f"<text x=\"{x + 9:.1f}\" y=\"{y + _BAR_H - 2}\" fill=\"#616161\">"
                     f"{_esc(note)}</text>")
    parts.append("</g>")
    return "".join(parts)


def _attempt_bar(x0: float, y: float, scale: float, span: tuple[float, float, str | None], critical: bool) -> str:
    """One attempt's segment: green when it succeeded, red (its error on hover) when it failed."""
    start, stop, failure = span
    colour = _COLOURS["success" if failure is None else "failed"]
    bar = _bar(x0 + start * scale, y, max(2.0, (stop - start) * scale), colour, critical, kind="attempt")
    return bar if failure is None else bar.replace("/>", f"><title>{_esc(failure)}</title></rect>", 1)


def _bar(x: float, y: float, w: float, colour: str, critical: bool, *, kind: str = "bar") -> str:
    outline = " class=\"crit\"" if critical else ""
    return (f"<rect data-kind=\"{kind}\" x=\"{x:.1f}\" y=\"{y}\" width=\"{w:.1f}\" height=\"{_BAR_H}\" "
            f"fill=\"{colour}\"{outline}/>")


def _row_tip(row: _Row) -> str:
    parts = [f"{row.label} ({row.action}): {row.status}"]
    if row.reason:
        parts.append(f"reason {row.reason}")
    if row.attempts:
        parts.append(f"{row.attempts} attempt(s)")
    for name, t in (("ready", row.ready), ("started", row.started), ("finished", row.finished)):
        if t is not None:
            parts.append(f"{name} {t:.4f}s")
    return "; ".join(parts)


# -- failures ---------------------------------------------------------------------------------


def _failures(rows: Mapping[str, _Row]) -> list[tuple[str, str, str]]:
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


def _failures_section(rows: Mapping[str, _Row]) -> str:
    failures = _failures(rows)
    if not failures:
        return "<h2>Failed attempts</h2><p>none</p>"
    shown = failures[:MAX_FAILURE_ROWS]
    body = "".join(f"<tr><td>{_esc(label)}</td><td class=\"num\">{_esc(attempt)}</td><td class=\"err\">{_esc(failure)}</td></tr>"
                   for label, attempt, failure in shown)
    more = f"<p>… and {len(failures) - len(shown)} more</p>" if len(failures) > len(shown) else ""
    return (f"<h2>Failed attempts</h2><table id=\"failures\"><tr><th>node</th><th>attempt</th><th>error</th></tr>"
            f"{body}</table>{more}")


# -- score and output -------------------------------------------------------------------------


def _score_section(score: Mapping[str, Any] | None) -> str:
    if not score:
        return "<h2>Score</h2><p>Not scored (run with a task to score it).</p>"
    rows = []
    for key in ("S", "output_quality", "completion_ratio", *(name for name, _, _ in _WEIGHTS)):
        rows.append(f"<tr><th>{key}</th><td class=\"num\">{_num(score.get(key))}</td></tr>")
    return (
        f"<h2>Score</h2><table>{''.join(rows)}</table>{_score_bar(score)}"
        f"<pre>{_esc(json.dumps(score.get('details', {}), indent=1, default=str))}</pre>"
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
        parts.append(f"<rect class=\"share\" x=\"{x:.1f}\" y=\"0\" width=\"{w:.1f}\" height=\"20\" fill=\"{colour}\">"
                     f"<title>{_esc(f'{weight} × {name} = {weight * value:.4f}')}</title></rect>")
        x += w
    legend = " ".join(f"<span><i style=\"background:{c}\"></i>{w} × {n}</span>" for n, w, c in _WEIGHTS)
    return (f"<svg id=\"score\" width=\"{width + 2:.0f}\" height=\"22\" xmlns=\"http://www.w3.org/2000/svg\">"
            f"<rect x=\"0\" y=\"0\" width=\"{width}\" height=\"20\" fill=\"#f5f5f5\" stroke=\"#bdbdbd\"/>"
            + "".join(parts) + f"</svg><p class=\"legend\">{legend}</p>")


def _output_section(report: Mapping[str, Any]) -> str:
    output = report.get("final_output")
    if not isinstance(output, Mapping):
        return "<h2>Final output</h2><p>none</p>"
    text = str(output.get("text", ""))
    code = (output.get("artifacts") or {}).get("code") or ""
    source = _esc(report.get("output_node") or "?")
    body = f"<pre>{_esc(_clip(text, _OUTPUT_CHARS))}</pre>"
    if code:
        body += f"<pre>{_esc(_clip(str(code), _OUTPUT_CHARS))}</pre>"
    return f"<h2>Final output (from {source})</h2>{body}"
