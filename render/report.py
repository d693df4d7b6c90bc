"""The run report for people: :func:`render_report` draws the dict of
:func:`engine.report.run_report` (and :func:`render_score` a score) with rich tables; it
never changes what it draws (docs/cli.md)."""

from __future__ import annotations

from typing import Any, Literal

from rich.console import Console
from rich.table import Table
from rich.text import Text

from protocol.outcomes import RunStatus

__all__ = ["DISPLAY_OUTPUT_CHARS", "render_report", "render_score"]

DISPLAY_OUTPUT_CHARS = 600
"""The final output's text is cut to this many characters on screen (never in JSON)."""

_STATUS_STYLE = {
    "success": "green",
    "failed": "red",
    "blocked": "yellow",
    "budget_abort": "magenta",  # a node's status, and the run's (RunStatus.BUDGET_ABORT)
    RunStatus.COMPLETED: "green",
    RunStatus.PARTIAL: "yellow",
    RunStatus.INVALID: "red",
}


def render_report(report: dict[str, Any], console: Console) -> None:
    """Print ``report`` (from :func:`run_report`): nodes, summary, score, final output."""
    status = report["status"]
    console.print(Text.assemble("run ", (status, _STATUS_STYLE.get(status, "bold"))))
    for error in report.get("errors", []):
        console.print(Text(f"  error: {error}", style="red"))
    if report["nodes"]:
        console.print(_node_table(report["nodes"]))
    for line in _summary_lines(report):
        console.print(line, highlight=False, markup=False)
    if "score" in report:
        render_score(report["score"], console)
    _print_final_output(report, console)


def _node_table(nodes: dict[str, dict[str, Any]]) -> Table:
    table = Table(title="nodes", title_justify="left")
    for column in ("node", "status", "reason", "attempts", "cost τ", "start s", "end s"):
        justify: Literal["right", "left"] = "right" if column in ("attempts", "cost τ", "start s", "end s") else "left"
        table.add_column(column, justify=justify, overflow="fold")
    for node_id, node in nodes.items():
        table.add_row(
            Text(node_id),
            Text(node["status"], style=_STATUS_STYLE.get(node["status"], "")),
            Text(node["reason"] or ""),
            str(node["attempts"]),
            f"{node['cost_tao']:.6g}",
            _seconds(node["started_s"]),
            _seconds(node["finished_s"]),
        )
    return table


def _summary_lines(report: dict[str, Any]) -> list[str]:
    ceiling = report["budget_ceiling"]
    return [
        f"completed {report['steps_completed']}/{report['total_steps']} steps "
        f"(completion_ratio {report['completion_ratio']:.3f}), hard failures {report['hard_failures']}",
        f"latency {report['latency_s']:.3f}s (critical path estimate {report['critical_path_s']:.3f}s, "
        f"{len(report['tiers'])} tiers)",
        f"cost {report['cost_tao']:.6g} τ (ceiling {'none' if ceiling is None else f'{ceiling:.6g} τ'})",
        f"retries {report['retries']}, unplanned {report['unplanned_retries']}, timeouts {report['timeouts']}",
    ]


def render_score(score: dict[str, Any], console: Console) -> None:
    """Print a score object: its components, then its details one per line."""
    console.print(_score_table(score))


def _score_table(score: dict[str, Any]) -> Table:
    table = Table(title="score", title_justify="left")
    table.add_column("component", overflow="fold")
    table.add_column("value", overflow="fold")
    for key, value in score.items():
        if key != "details":
            table.add_row(Text(key), Text(f"{value:.4f}" if isinstance(value, float) else _shown(value)))
    for key, value in _flatten(score.get("details") or {}, "details"):
        table.add_row(Text(key, style="dim"), Text(_shown(value)))
    return table


def _flatten(value: Any, prefix: str) -> list[tuple[str, Any]]:
    """Nested dicts as ``(dotted.key, leaf)`` rows; lists of objects one row per item."""
    if isinstance(value, dict) and value:
        return [row for key, item in value.items() for row in _flatten(item, f"{prefix}.{key}")]
    if isinstance(value, list) and any(isinstance(item, (dict, list)) for item in value):
        return [row for i, item in enumerate(value) for row in _flatten(item, f"{prefix}[{i}]")]
    return [(prefix, value)]


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    if value is None:
        return "none"
    if isinstance(value, list):
        return ", ".join(_shown(item) for item in value)
    if isinstance(value, dict):
        return "{}"
    return str(value)


def _print_final_output(report: dict[str, Any], console: Console) -> None:
    output = report.get("final_output")
    source = report.get("output_node")
    if output is None:
        console.print("final output: none", highlight=False, markup=False)
        return
    console.print(f"final output (from {source}):", highlight=False, markup=False)
    console.print(Text(_clip(str(output.get("text", "")))))
    code = output.get("artifacts", {}).get("code")
    if code:
        console.print(Text(_clip(code), style="cyan"))


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def _clip(text: str) -> str:
    if len(text) <= DISPLAY_OUTPUT_CHARS:
        return text
    return f"{text[:DISPLAY_OUTPUT_CHARS]}… [{len(text) - DISPLAY_OUTPUT_CHARS} more characters]"
