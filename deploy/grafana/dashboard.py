"""The dagnet Grafana dashboard, as code (Grafana Labs' grafana-foundation-sdk).

    python deploy/grafana/dashboard.py > deploy/grafana/dashboards/dagnet.json

The committed JSON is what Grafana loads; `tests/project/test_dashboard_e2e.py` fails when it
differs from what this file builds, when a panel names a metric dagnet does not
export, and (with a real Prometheus) when a panel's query returns no data.
Each panel is one row of PANELS: (section, title, kind, unit, [(expr, legend)]).
"""

from __future__ import annotations

import json
import sys

from grafana_foundation_sdk.builders.dashboard import Dashboard, Row
from grafana_foundation_sdk.builders.prometheus import Dataquery
from grafana_foundation_sdk.builders.stat import Panel as Stat
from grafana_foundation_sdk.builders.table import Panel as Table
from grafana_foundation_sdk.builders.timeseries import Panel as Timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import BigValueTextMode
from grafana_foundation_sdk.models.dashboard import DataSourceRef

DATASOURCE = DataSourceRef(type_val="prometheus", uid="prometheus")
RATE = "$__rate_interval"

PANELS: list[tuple[str, str, str, str, list[tuple[str, str]]]] = [
    (
        "Subnet",
        "Leaderboard: windowed mean score S by miner",
        "table",
        "none",
        [("max by (uid) (dagnet_validator_score)", "S")],
    ),
    (
        "Subnet",
        "Margin over the reference per miner (window mean, credited)",
        "timeseries",
        "none",
        [("max by (uid) (dagnet_validator_margin)", "uid {{uid}}")],
    ),
    (
        "Subnet",
        "Share of steps beating the reference per miner",
        "timeseries",
        "percentunit",
        [("max by (uid) (dagnet_validator_beats_reference)", "uid {{uid}}")],
    ),
    (
        "Subnet",
        "Where the last weights sent the emission",
        "named",
        "none",
        [("max by (kind) (dagnet_validator_payout) == 1", "{{kind}}")],
    ),
    (
        "Subnet",
        "Weights set by the validator (a burn: the subnet owner's uid)",
        "timeseries",
        "percentunit",
        [("max by (uid) (dagnet_validator_weight)", "uid {{uid}}")],
    ),
    (
        "Subnet",
        "Incentive on chain",
        "timeseries",
        "percentunit",
        [("max by (uid) (dagnet_validator_miner_incentive)", "uid {{uid}}")],
    ),
    (
        "Subnet",
        "Emission on chain per tempo",
        "timeseries",
        "none",
        [("max by (uid) (dagnet_validator_miner_emission_tao)", "uid {{uid}}")],
    ),
    (
        "Validator",
        "Degraded, by reason (1 while /health gives it)",
        "timeseries",
        "none",
        [("max by (reason) (dagnet_validator_degraded)", "{{reason}}")],
    ),
    (
        "Validator",
        "Steps per minute by outcome",
        "timeseries",
        "none",
        [(f"sum by (outcome) (rate(dagnet_validator_steps_total[{RATE}])) * 60", "{{outcome}}")],
    ),
    (
        "Validator",
        "Step phase duration (p90)",
        "timeseries",
        "s",
        [
            (
                f"histogram_quantile(0.9, sum by (le, phase) (rate(dagnet_validator_step_phase_seconds_bucket[{RATE}])))",
                "{{phase}}",
            )
        ],
    ),
    (
        "Validator",
        "Draws of the world the margins are means over (mean per step)",
        "timeseries",
        "none",
        [
            (
                f"sum(rate(dagnet_validator_margin_draws_sum[{RATE}])) / sum(rate(dagnet_validator_margin_draws_count[{RATE}]))",
                "draws",
            )
        ],
    ),
    (
        "Validator",
        "Executions per minute by status",
        "timeseries",
        "none",
        [(f"sum by (status) (rate(dagnet_validator_executions_total[{RATE}])) * 60", "{{status}}")],
    ),
    (
        "Validator",
        "Mean score by tier",
        "timeseries",
        "none",
        [
            (
                f"sum by (tier) (rate(dagnet_validator_execution_score_sum[{RATE}])) / sum by (tier) (rate(dagnet_validator_execution_score_count[{RATE}]))",
                "{{tier}}",
            )
        ],
    ),
    (
        "Validator",
        "Node latency by subnet (p95)",
        "timeseries",
        "s",
        [
            (
                f"histogram_quantile(0.95, sum by (le, subnet) (rate(dagnet_validator_node_latency_seconds_bucket[{RATE}])))",
                "{{subnet}}",
            )
        ],
    ),
    (
        "Validator",
        "Cost per execution (mean)",
        "timeseries",
        "none",
        [
            (
                f"sum(rate(dagnet_validator_execution_cost_tao_sum[{RATE}])) / sum(rate(dagnet_validator_execution_cost_tao_count[{RATE}]))",
                "TAO",
            )
        ],
    ),
    (
        "Validator",
        "Budget aborts and timeouts",
        "timeseries",
        "none",
        [
            (f"sum(increase(dagnet_validator_budget_aborts_total[{RATE}]))", "budget aborts"),
            (f"sum by (kind) (increase(dagnet_validator_timeouts_total[{RATE}]))", "timeouts ({{kind}})"),
        ],
    ),
    (
        "Validator",
        "Weights set, by chain result",
        "timeseries",
        "none",
        [(f"sum by (result) (increase(dagnet_validator_weights_set_total[{RATE}]))", "{{result}}")],
    ),
    (
        "Validator",
        "Blocks since weights were last accepted",
        "stat",
        "none",
        [("max(dagnet_validator_metagraph_block) - max(dagnet_validator_last_weights_block)", "blocks")],
    ),
    ("Validator", "Metagraph sync age", "stat", "s", [("max(dagnet_validator_metagraph_sync_age_seconds)", "age")]),
    (
        "Validator",
        "Benchmark tasks by lifecycle state",
        "timeseries",
        "none",
        [("sum by (state) (dagnet_validator_tasks)", "{{state}}")],
    ),
    (
        "Validator",
        "Sandbox runs by outcome",
        "timeseries",
        "none",
        [(f"sum by (outcome) (increase(dagnet_validator_sandbox_runs_total[{RATE}]))", "{{outcome}}")],
    ),
    (
        "Miners",
        "Requests per second by endpoint and code",
        "timeseries",
        "reqps",
        [(f"sum by (endpoint, code) (rate(dagnet_miner_requests_total[{RATE}]))", "{{endpoint}} {{code}}")],
    ),
    (
        "Miners",
        "Auth failures by reason",
        "timeseries",
        "none",
        [(f"sum by (reason) (increase(dagnet_miner_auth_failures_total[{RATE}]))", "{{reason}}")],
    ),
    (
        "Miners",
        "Request latency p50 / p99",
        "timeseries",
        "s",
        [
            (
                f"histogram_quantile(0.5, sum by (le, endpoint) (rate(dagnet_miner_request_latency_seconds_bucket[{RATE}])))",
                "p50 {{endpoint}}",
            ),
            (
                f"histogram_quantile(0.99, sum by (le, endpoint) (rate(dagnet_miner_request_latency_seconds_bucket[{RATE}])))",
                "p99 {{endpoint}}",
            ),
        ],
    ),
    (
        "Miners",
        "Chain block seen by each miner",
        "timeseries",
        "none",
        [("max by (instance) (dagnet_miner_chain_block)", "{{instance}}")],
    ),
]

_KINDS = {"timeseries": Timeseries, "stat": Stat, "named": Stat, "table": Table}
"""``named``: a stat that shows the name of the one series its query keeps (a label's value), not a number."""
DESCRIPTIONS = {
    "Where the last weights sent the emission": (
        "How the validator's last accepted weights split the emission (docs/scoring.md). "
        "margin: 95 % to the miners that beat the validator's reference (good) in proportion to their margin, "
        "5 % as a floor to the rest. burn: nobody beat the reference, so 95 % went to the subnet owner's uid "
        "(burned) and 5 % to the floor. floor_only: nobody beat it and the owner's hotkey is not on the subnet: "
        "the floor took it all. nothing: no miner scored. The weights panel shows each uid's part."
    ),
}


def _panel(panel_id: int, title: str, kind: str, unit: str, targets: list[tuple[str, str]]):
    panel = _KINDS[kind]().id(panel_id).title(title).datasource(DATASOURCE).unit(unit).height(8).span(12)
    if title in DESCRIPTIONS:
        panel = panel.description(DESCRIPTIONS[title])
    if kind == "named":
        panel = panel.text_mode(BigValueTextMode.NAME).no_value("no weights set yet")
    for ref, (expr, legend) in zip("ABCDEFGH", targets):
        query = Dataquery().expr(expr).legend_format(legend).ref_id(ref)
        if kind == "table":
            query = query.instant().format("table")
        panel = panel.with_target(query)
    return panel


def build() -> Dashboard:
    dashboard = (
        Dashboard("dagnet")
        .uid("dagnet-subnet")
        .tags(["dagnet", "bittensor"])
        .refresh("15s")
        .time("now-1h", "now")
        .timezone("browser")
    )
    section = None
    for panel_id, (sec, title, kind, unit, targets) in enumerate(PANELS, start=1):
        if sec != section:
            dashboard = dashboard.with_row(Row(sec).id(100 + panel_id))
            section = sec
        dashboard = dashboard.with_panel(_panel(panel_id, title, kind, unit, targets))
    return dashboard


def render() -> str:
    return json.dumps(json.loads(JSONEncoder(sort_keys=True).encode(build().build())), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
