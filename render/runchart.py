"""The drawings of the run page (:mod:`render.runpage`): the plan's DAG laid out by Kahn
levels and the timeline, one row per node (and per frame instance), as inline SVG; and
the row each draws from.

Everything a plan or a tool supplied is escaped (:func:`esc`).
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from protocol.graph import Graph
from protocol.outcomes import RunStatus
from protocol.plan import WorkflowPlan

__all__ = [
    "COLOURS",
    "MAX_DAG_NODES",
    "MAX_INSTANCE_ROWS",
    "NOT_RUN",
    "Row",
    "clip",
    "dag_section",
    "esc",
    "gantt_section",
    "num",
    "status_colour",
]

MAX_DAG_NODES = 400
"""Larger plans get the timeline only: a DAG drawing of them is unreadable anyway."""
MAX_INSTANCE_ROWS = 100
"""Frame instances drawn under their node; the rest are counted in a note."""
_LABEL_CHARS = 26
COLOURS = {
    "success": "#2e7d32",
    "failed": "#c62828",
    "blocked": "#f9a825",
    "budget_abort": "#8e24aa",
}
NOT_RUN = "#9e9e9e"


@dataclass
class Row:
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
    instances: list[Row] = field(default_factory=list)  # a frame-scoped node's, drawn under it
    hidden: int = 0  # instances beyond MAX_INSTANCE_ROWS

    @property
    def label(self) -> str:
        return self.node_id if self.frame is None else f"{self.node_id}[{self.frame}]"


def time_horizon(rows: Iterable[Row]) -> float:
    times = [
        t
        for row in rows
        for r in (row, *row.instances)
        for t in (r.ready, r.started, r.finished, r.settled)
        if t is not None
    ]
    return max(times, default=0.0) or 1e-3


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def status_colour(status: str) -> str:
    return COLOURS.get(
        status,
        {
            str(RunStatus.COMPLETED): COLOURS["success"],
            str(RunStatus.PARTIAL): COLOURS["blocked"],
            str(RunStatus.INVALID): COLOURS["failed"],
        }.get(status, NOT_RUN),
    )


def num(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "–"


# -- the DAG ----------------------------------------------------------------------------

_BOX_W, _BOX_H, _COL_W, _ROW_H, _PAD = 150, 30, 200, 44, 10


def dag_section(plan: WorkflowPlan, graph: Graph | None, rows: Mapping[str, Row], critical: set[str]) -> str:
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
        f'<h2>Plan</h2><svg id="dag" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">'
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" '
        'markerHeight="6" orient="auto"><path d="M0,0L10,5L0,10z" fill="#616161"/></marker></defs>'
        + "".join(edges)
        + "".join(boxes)
        + "</svg>"
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
    stroke = 'class="crit"' if critical else 'stroke="#9e9e9e" stroke-width="1.2"'
    return (
        f'<path d="M{x1:.1f},{y1:.1f} C{mid:.1f},{y1:.1f} {mid:.1f},{y2:.1f} {x2:.1f},{y2:.1f}" '
        f'fill="none" {stroke} marker-end="url(#arrow)"/>'
    )


def _box(at: tuple[float, float], row: Row, critical: bool) -> str:
    x, y = at
    colour = COLOURS.get(row.status, NOT_RUN)
    tip = f"{row.node_id} ({row.action}): {row.status}" + (f" — {row.reason}" if row.reason else "")
    outline = ' class="crit"' if critical else ""
    return (
        f'<g data-node="{esc(row.node_id)}"><title>{esc(tip)}</title>'
        f'<rect x="{x}" y="{y}" width="{_BOX_W}" height="{_BOX_H}" rx="5" fill="{colour}" '
        f'fill-opacity="0.18" stroke="{colour}"{outline}/>'
        f'<text x="{x + 6}" y="{y + 13}">{esc(clip(row.node_id, 22))}</text>'
        f'<text x="{x + 6}" y="{y + 25}" fill="#616161">{esc(clip(row.action, 22))}</text></g>'
    )


# -- the timeline -------------------------------------------------------------------------

_LABEL_W, _PLOT_W, _BAR_H, _LINE_H, _AXIS_H = 200, 880, 12, 18, 24


def gantt_section(graph: Graph | None, rows: Mapping[str, Row], critical: set[str]) -> str:
    order = [graph.ids[i] for i in graph.topo_order()] if graph is not None else list(rows)
    lines = [line for node_id in order for line in _lines(rows[node_id], node_id in critical)]
    horizon = time_horizon(rows.values())
    scale = _PLOT_W / horizon
    height = _AXIS_H + len(lines) * _LINE_H + _PAD
    width = _LABEL_W + _PLOT_W + 60
    body = [_axis(horizon, scale, height)]
    for n, (line, on_path) in enumerate(lines):
        y = _AXIS_H + n * _LINE_H
        if isinstance(line, Row):
            body.append(_gantt_row(line, y, scale, on_path))
        else:
            body.append(f'<text x="14" y="{y + _BAR_H - 2}" fill="#616161">{esc(line)}</text>')
    return (
        f'<h2>Timeline</h2><svg id="gantt" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">' + "".join(body) + "</svg>"
    )


def _lines(row: Row, critical: bool) -> list[tuple[Row | str, bool]]:
    """A node's timeline lines: its own, its instances', and a note for those not drawn."""
    lines: list[tuple[Row | str, bool]] = [(row, critical), *((inst, False) for inst in row.instances)]
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
        parts.append(
            f'<line x1="{x:.1f}" y1="{_AXIS_H - 6}" x2="{x:.1f}" y2="{height}" stroke="#eeeeee"/>'
            f'<text x="{x:.1f}" y="{_AXIS_H - 10}" text-anchor="middle" fill="#616161">{t:.4g}s</text>'
        )
    return "".join(parts)


def _gantt_row(row: Row, y: float, scale: float, critical: bool) -> str:
    x0 = _LABEL_W
    label = ("★ " if critical else "") + ("  ↳ " if row.frame is not None else "") + clip(row.label, _LABEL_CHARS)
    weight = ' font-weight="700"' if critical else ""
    parts = [
        f'<g data-node="{esc(row.node_id)}"><title>{esc(_row_tip(row))}</title>'
        f'<text x="4" y="{y + _BAR_H - 2}"{weight}>{esc(label)}</text>'
    ]
    mid = y + _BAR_H / 2
    if row.ready is not None and row.started is not None and row.started > row.ready:
        parts.append(
            f'<line x1="{x0 + row.ready * scale:.1f}" y1="{mid}" x2="{x0 + row.started * scale:.1f}" '
            f'y2="{mid}" stroke="#bdbdbd" stroke-dasharray="2,2"/>'
        )
    colour = COLOURS.get(row.status, NOT_RUN)
    if row.started is not None:
        end = row.finished if row.finished is not None else row.settled or row.started
        if row.spans:
            parts += [_attempt_bar(x0, y, scale, span, critical) for span in row.spans]
        else:
            parts.append(_bar(x0 + row.started * scale, y, max(2.0, (end - row.started) * scale), colour, critical))
        if row.attempts > 1:
            parts.append(f'<text x="{x0 + end * scale + 4:.1f}" y="{y + _BAR_H - 2}">×{row.attempts}</text>')
    else:
        t = row.settled if row.settled is not None else 0.0
        x = x0 + t * scale
        note = clip(f"{row.status}: {row.reason or ''}", 60)
        parts.append(
            f'<path class="marker" d="M{x:.1f},{y}l6,6l-6,6l-6,-6z" fill="{colour}"/>'
            f'<text x="{x + 9:.1f}" y="{y + _BAR_H - 2}" fill="#616161">'
            f"{esc(note)}</text>"
        )
    parts.append("</g>")
    return "".join(parts)


def _attempt_bar(x0: float, y: float, scale: float, span: tuple[float, float, str | None], critical: bool) -> str:
    """One attempt's segment: green when it succeeded, red (its error on hover) when it failed."""
    start, stop, failure = span
    colour = COLOURS["success" if failure is None else "failed"]
    bar = _bar(x0 + start * scale, y, max(2.0, (stop - start) * scale), colour, critical, kind="attempt")
    return bar if failure is None else bar.replace("/>", f"><title>{esc(failure)}</title></rect>", 1)


def _bar(x: float, y: float, w: float, colour: str, critical: bool, *, kind: str = "bar") -> str:
    outline = ' class="crit"' if critical else ""
    return f'<rect data-kind="{kind}" x="{x:.1f}" y="{y}" width="{w:.1f}" height="{_BAR_H}" fill="{colour}"{outline}/>'


def _row_tip(row: Row) -> str:
    parts = [f"{row.label} ({row.action}): {row.status}"]
    if row.reason:
        parts.append(f"reason {row.reason}")
    if row.attempts:
        parts.append(f"{row.attempts} attempt(s)")
    for name, t in (("ready", row.ready), ("started", row.started), ("finished", row.finished)):
        if t is not None:
            parts.append(f"{name} {t:.4f}s")
    return "; ".join(parts)
