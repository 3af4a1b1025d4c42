"""deploy/: the alert rules and the Grafana dashboard name only metrics the two exporters export."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
GAUGES = {
    "alma_last_tick_timestamp_seconds",
    "alma_runs_blocked",
    "alma_routines",
    "alma_run_queue_depth",
    "alma_next_wake_timestamp_seconds",
    "alma_routines_overdue",
}
WORKER = {
    "alma_ticks_total",
    "alma_tick_duration_seconds_bucket",
    "alma_fires_claimed_total",
    "alma_fires_missed_total",
    "alma_runs_finished_total",
    "alma_fire_lag_seconds_bucket",
    "alma_errors_total",
}


def _metrics(expr: str) -> set[str]:
    return set(re.findall(r"\balma_[a-z_]+", expr))


def test_the_alert_rules_cover_no_tick_blocked_runs_and_missed_fires() -> None:
    rules = {
        r["alert"]: r
        for g in yaml.safe_load((DEPLOY / "alma-schedule-alerts.yml").read_text())["groups"]
        for r in g["rules"]
    }
    assert "time() - alma_last_tick_timestamp_seconds > 3 * 60" in rules["AlmaNoTick"]["expr"]
    assert rules["AlmaRunsBlocked"]["expr"] == "alma_runs_blocked > 0" and rules["AlmaRunsBlocked"]["for"] == "15m"
    # issue 44: fires no tick claimed (collapsed, counted on their routine and by the worker exporter)
    assert rules["AlmaFiresMissed"]["expr"] == "sum by (kind) (increase(alma_fires_missed_total[15m])) > 0"
    # issue 52: the "did not run" alarm, routines with an overdue fire (no per-routine label)
    assert rules["AlmaRoutinesOverdue"]["expr"] == "alma_routines_overdue > 0"
    for rule in rules.values():
        assert _metrics(rule["expr"]) <= GAUGES | WORKER, rule


def test_the_grafana_dashboard_reads_only_exported_metrics() -> None:
    dash = json.loads((DEPLOY / "grafana-dashboard.json").read_text())
    used = {m for p in dash["panels"] for t in p["targets"] for m in _metrics(t["expr"])}
    assert used <= GAUGES | WORKER and {"alma_ticks_total", "alma_runs_blocked"} <= used
