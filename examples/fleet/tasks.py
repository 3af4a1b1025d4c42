"""The fleet's own tasks (routed to Celery's default ``celery`` queue)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from fleet import app

log = logging.getLogger(__name__)


@app.task
def heartbeat() -> str:
    """Say the fleet is alive; returns the instant it ran (UTC, ISO)."""
    now = datetime.now(UTC).isoformat(timespec="seconds")
    log.info("fleet heartbeat at %s", now)
    return now


@app.task
def report(period: str = "day") -> dict[str, str]:
    """Build the fleet's report of one period (a stand-in for real work: it logs and returns it)."""
    if period not in ("day", "week"):
        raise ValueError(f"period must be 'day' or 'week', not {period!r}")
    built = {"period": period, "built_at": datetime.now(UTC).isoformat(timespec="seconds")}
    log.info("fleet report %s", built)
    return built
