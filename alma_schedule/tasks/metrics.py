"""The worker exporter: counters and histograms of one worker host, in Prometheus's
multiprocess mode.

docs/architecture.md, section "The modules, in detail" (tasks/metrics.py).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from typing import Any

from alma_schedule.model import TERMINAL, RunRecord, TickReport

log = logging.getLogger(__name__)

__all__ = ["observe_run", "observe_tick", "start_exporter"]

ENV = "PROMETHEUS_MULTIPROC_DIR"
_metrics: dict[str, Any] = {}


def _dir(port: int) -> str:
    return os.environ.get(ENV) or os.path.join(tempfile.gettempdir(), f"alma-schedule-metrics-{port}")


def start_exporter(port: int, addr: str = "127.0.0.1") -> str:
    """Wipe the multiprocess directory, serve its merged metrics on ``port``; returns the directory."""
    from celery.signals import worker_process_shutdown
    from prometheus_client import CollectorRegistry, start_http_server, values
    from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

    path = _dir(port)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    os.environ[ENV] = path
    values.ValueClass = values.get_value_class()  # type: ignore[no-untyped-call]  # imported before us?
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=path)  # type: ignore[no-untyped-call]
    start_http_server(port, addr=addr, registry=registry)

    def dead(pid: int | None = None, **_: Any) -> None:
        mark_process_dead(pid if pid is not None else os.getpid(), path)  # type: ignore[no-untyped-call]

    worker_process_shutdown.connect(dead, weak=False)
    log.info("alma_schedule: worker metrics on %s:%d (multiprocess dir %s)", addr, port, path)
    return path


def _get() -> dict[str, Any] | None:
    if ENV not in os.environ:
        return None
    if not _metrics:
        from prometheus_client import Counter, Histogram

        lag_buckets = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600)
        _metrics.update(
            ticks=Counter("alma_ticks_total", "Ticks run."),
            duration=Histogram("alma_tick_duration_seconds", "How long a tick took."),
            claimed=Counter("alma_fires_claimed_total", "Fires claimed by ticks.", ["kind"]),
            missed=Counter(
                "alma_fires_missed_total", "Fires collapsed by ticks' claims (never claimed; counted).", ["kind"]
            ),
            finished=Counter("alma_runs_finished_total", "Runs finished by runs of this host.", ["state", "reason"]),
            lag=Histogram("alma_fire_lag_seconds", "Start minus due instant of the runs started.", buckets=lag_buckets),
            errors=Counter("alma_errors_total", "Errors of ticks by step.", ["step"]),
            pruned=Counter("alma_runs_pruned_total", "Terminal runs deleted by ticks' run retention."),
        )
    return _metrics


def _step(routine: str) -> str:
    return routine.strip("<>") if routine.startswith("<") else "plan"


def observe_tick(report: TickReport, seconds: float) -> None:
    m = _get()
    if m is None:
        return
    m["ticks"].inc()
    m["duration"].observe(seconds)
    for kind, n in report.claimed_kinds:
        m["claimed"].labels(kind).inc(n)
    for kind, n in report.missed_kinds:
        m["missed"].labels(kind).inc(n)
    for err in report.errors:
        m["errors"].labels(_step(err.routine)).inc()
    if report.runs_pruned:
        m["pruned"].inc(report.runs_pruned)


def observe_run(record: RunRecord, started_here: bool) -> None:
    """A run task's outcome: the finish counter (terminal only) and the lag of a run it started."""
    m = _get()
    if m is None:
        return
    if record.state in TERMINAL:
        m["finished"].labels(record.state, record.reason or "").inc()
    if started_here and record.started_at is not None:
        m["lag"].observe(max(0.0, (record.started_at - record.fire_at).total_seconds()))
