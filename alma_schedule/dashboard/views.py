"""The dashboard's read pages as plain functions ``(store, settings, access, query) -> markup``.
docs/architecture.md, section "The modules, in detail" (dashboard/views.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from alma_schedule.core.policy import POLICY_KEYS
from alma_schedule.dashboard.auth import Access
from alma_schedule.dashboard.html import CAP, attr, count_text, esc, instant, link, routine_path, table, url
from alma_schedule.dashboard.views_overdue import overdue_section
from alma_schedule.model import NON_TERMINAL, Routine, RunRecord, RunState, Scope
from alma_schedule.settings import Settings
from alma_schedule.stores.base import Store

ROUTINE_STATES = ("enabled", "paused", "disabled", "erroring", "deleted")


def schedule_words(schedule: Mapping[str, object]) -> str:
    """The schedule in words: ``cron 0 8 * * 1-5 in Europe/Lisbon``, ``every 15m``, ``once at ...``,
    ``sunset at lat 64.1, lon -21.9``."""
    if "cron" in schedule:
        return f"cron {schedule['cron']} in {schedule.get('tz') or 'UTC'}"
    if "every" in schedule:
        return f"every {schedule['every']}"
    if "at" in schedule:
        return f"once at {schedule['at']}"
    if "solar" in schedule:
        return f"{schedule['solar']} at lat {schedule.get('lat')}, lon {schedule.get('lon')}"
    return "unknown schedule"


def policies_words(schedule: Mapping[str, object]) -> str:
    return ", ".join(f"{k}={schedule[k]}" for k in sorted(schedule) if k in POLICY_KEYS)


def routine_state(r: Routine) -> str:
    """``deleted``, ``disabled``, ``paused`` (:attr:`Routine.inactive_reason`), else ``erroring`` or ``enabled``."""
    return r.inactive_reason or ("erroring" if r.last_error is not None else "enabled")


def in_zone(at: datetime | None, schedule: Mapping[str, object]) -> str:
    tz = schedule.get("tz")
    if at is None or not isinstance(tz, str) or not tz:
        return "-"
    try:
        return esc(at.astimezone(ZoneInfo(tz)).isoformat() + f" ({tz})")
    except (ValueError, KeyError):
        return "-"


def routine_href(r: Routine | RunRecord) -> str:
    return routine_path(r.org, r.uid, r.routine_id)


def run_cells(r: RunRecord, *, scoped: bool = True) -> list[str]:
    who = [] if scoped else [esc(f"{r.org}/{r.uid}")]
    return [
        *who,
        link(routine_href(r), r.routine_id),
        esc(r.run_id),
        esc(r.state),
        esc(r.reason),
        instant(r.fire_at),
        instant(r.started_at),
        instant(r.finished_at),
        esc(r.error_class),
    ]


RUN_HEADERS = ["routine", "run", "state", "reason", "fire (UTC)", "started", "finished", "error"]


def scope_picker(access: Access, current: Scope | None, path: str) -> str:
    """Links to the listed scopes, and a box to type one (ORG/* and ``*`` grants)."""
    links = " ".join(link(url(path, scope=str(s)), str(s)) for s in access.listed())
    value = attr(str(current)) if current else ""
    return (
        f'<form method="get" action="{esc(path)}">scope <input name="scope" value="{value}" '
        f'placeholder="ORG/UID"> <button>show</button> {links}</form>'
    )


def clock_log(store: Store, now: datetime) -> str:
    """The last hour in one line, and the 24 h chart of the tick log (1,440 minutes at most)."""
    from alma_schedule.dashboard.charts import Minute, clock_health, lag_ms

    minutes = store.tick_log(1440)
    hour = [m for m in minutes if m.minute > now - timedelta(hours=1)]
    p50s = sorted(m.lag_p50 for m in hour if m.lag_p50 is not None)
    p95s = [m.lag_p95 for m in hour if m.lag_p95 is not None]
    p50 = lag_ms(p50s[(len(p50s) - 1) // 2]) if p50s else "-"
    p95 = lag_ms(max(p95s)) if p95s else "-"
    summary = (
        f"<p>ticks in the last hour: <b>{sum(m.ticks for m in hour)}</b>, fires claimed: "
        f"{sum(m.claimed for m in hour)}, fire lag p50 {esc(p50)} (median minute), p95 {esc(p95)} "
        "(worst minute)</p>"
    )
    shown = [Minute(m.minute, m.ticks, m.claimed, m.lag_p50, m.lag_p95) for m in minutes]
    return summary + clock_health(shown, now)


def overview(store: Store, settings: Settings, access: Access, now: datetime, sc: Scope | None = None) -> str:
    last = store.last_tick()
    max_age = settings.heartbeat_max_age
    if last is None:
        health = '<p class="bad">no tick has run</p>'
    else:
        age = now - last
        cls, word = ("ok", "ok") if age <= max_age else ("bad", "stale")
        health = (
            f'<p class="{cls}">clock {word}: last tick {instant(last)}, {age.total_seconds():.0f} s ago '
            f"(ALMA_HEARTBEAT_MAX_AGE {max_age.total_seconds():.0f} s)</p>"
        )
    parts = [
        f"<h2>Clock health</h2>{health}<p>next wake-up hint: {instant(store.next_wake_at())}</p>",
        clock_log(store, now),
    ]
    if access.fleet:
        counts = store.count_routines(CAP)
        counts["erroring"] = store.erroring(limit=1).count
        counts["blocked runs"] = len(store.blocked(now, settings.run_time_limit, CAP + 1))
        rows = [[esc(state), link(_count_href(state), count_text(n, n > CAP))] for state, n in counts.items()]
        parts.append("<h2>Routines by state (the whole fleet)</h2>" + table(["state", "count"], rows))
    else:
        parts.append('<p class="note">fleet-wide counts are shown to ALMA_DASHBOARD_SCOPES=* only</p>')
    parts.append(overdue_section(store, access, now))  # the "did not run" alarm (views_overdue.py)
    parts.append(failures_section(store, access, now, sc))
    parts.append(next_day_section(store, access, now, sc))
    return "".join(parts)


def _count_href(state: str) -> str:
    """The list behind an overview count (blocked runs: the stuck page)."""
    if state == "blocked runs":
        return "/dashboard/stuck"
    return url("/dashboard/routines", state=state)


def next_day_section(store: Store, access: Access, now: datetime, sc: Scope | None) -> str:
    """The next 24 h of the fleet, the scope or the user's scopes (a bounded sample, named)."""
    from alma_schedule.dashboard.nextday import next_day, next_day_chart

    what = str(sc) if sc is not None else ("the whole fleet" if access.fleet else "your scopes")
    return f"<h2>The next 24 h ({esc(what)})</h2>" + next_day_chart(next_day(store, access, sc, now), what)


def failures_section(store: Store, access: Access, now: datetime, sc: Scope | None) -> str:
    """Failed runs of the last 24 h by reason over the scopes shown (a bounded read, each count a
    link to the ledger filtered to it)."""
    from alma_schedule.dashboard.fleet import BUDGET, RunFilter, fleet_runs

    since = (now - timedelta(days=1)).replace(microsecond=0)
    read = fleet_runs(store, access, RunFilter(sc, state=RunState.FAILED, since=since), None, page=BUDGET)
    failures = Counter(run.reason or "-" for run in read.rows)
    scope = None if sc is None else str(sc)
    rows = [
        [
            esc(reason),
            link(url("/dashboard/ledger", scope=scope, state="failed", reason=reason, since=since.isoformat()), n),
        ]
        for reason, n in failures.most_common()
    ]
    shown = scope or ("the whole fleet" if access.fleet else "your scopes")
    capped = f" (the first {BUDGET:,} runs read)" if read.stopped or len(read.rows) >= BUDGET else ""
    return (
        f"<h2>Failures of the last 24 h by reason ({esc(shown)}){esc(capped)}</h2>"
        + scope_picker(access, sc, "/dashboard/")
        + table(["reason", "runs"], rows)
    )


def blocking_run(store: Store, sc: Scope, routine_id: str) -> RunRecord | None:
    for state in sorted(NON_TERMINAL):
        found = store.list_runs(sc, routine_id=routine_id, state=state, limit=1)
        if found:
            return found[0]
    return None
