"""The dashboard's read pages as plain functions ``(store, settings, access, query) -> markup``.

Each read is bounded: the routines and ledger pages read one key-ordered page (paged by key, never
OFFSET) and the filters the store cannot apply scan at most :data:`SCAN_PAGES` pages; counts stop
at :data:`~alma_schedule.dashboard.html.CAP` and show "10,000+".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from alma_schedule.core.policy import POLICY_KEYS
from alma_schedule.dashboard.auth import Access
from alma_schedule.dashboard.html import CAP, count_text, esc, instant, link, table, url
from alma_schedule.model import NON_TERMINAL, Routine, RunRecord, RunState, Scope
from alma_schedule.settings import Settings
from alma_schedule.stores.base import Store

PAGE = 50
SCAN_PAGES = 20
ROUTINE_STATES = ("enabled", "paused", "disabled", "erroring", "deleted")


def schedule_words(schedule: Mapping[str, object]) -> str:
    """The schedule in words: ``cron 0 8 * * 1-5 in Europe/Lisbon``, ``every 15m``, ``once at ...``."""
    if "cron" in schedule:
        return f"cron {schedule['cron']} in {schedule.get('tz') or 'UTC'}"
    if "every" in schedule:
        return f"every {schedule['every']}"
    if "at" in schedule:
        return f"once at {schedule['at']}"
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


def routine_path(org: str, uid: str, routine_id: str) -> str:
    return url("/dashboard/routine", scope=f"{org}/{uid}", id=routine_id)


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
    value = esc(str(current)) if current else ""
    return (
        f'<form method="get" action="{esc(path)}">scope <input name="scope" value="{value}" '
        f'placeholder="ORG/UID"> <button>show</button> {links}</form>'
    )


def clock_log(store: Store, now: datetime) -> str:
    """Ticks of the last hour and the fire lag, from the tick log's last 60 minutes."""
    minutes = store.tick_log(60)
    hour = [m for m in minutes if m.minute > now - timedelta(hours=1)]
    p50s = sorted(m.lag_p50 for m in hour if m.lag_p50 is not None)
    p95s = [m.lag_p95 for m in hour if m.lag_p95 is not None]
    p50 = f"{p50s[(len(p50s) - 1) // 2]:.1f} s" if p50s else "-"
    p95 = f"{max(p95s):.1f} s" if p95s else "-"
    summary = (
        f"<p>ticks in the last hour: <b>{sum(m.ticks for m in hour)}</b>, fires claimed: "
        f"{sum(m.claimed for m in hour)}, fire lag p50 {esc(p50)} (median minute), p95 {esc(p95)} "
        "(worst minute)</p>"
    )
    rows = [[instant(m.minute), esc(m.ticks), esc(m.claimed), esc(m.lag_p50), esc(m.lag_p95)] for m in minutes[:10]]
    return summary + table(["minute", "ticks", "claimed", "lag p50 (s)", "lag p95 (s)"], rows, empty="no tick logged")


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
        rows = [[esc(state), count_text(n, n > CAP)] for state, n in counts.items()]
        parts.append("<h2>Routines by state (the whole fleet)</h2>" + table(["state", "count"], rows))
    else:
        parts.append('<p class="note">fleet-wide counts are shown to ALMA_DASHBOARD_SCOPES=* only</p>')
    failures: Counter[str] = Counter()
    since = now - timedelta(days=1)
    scopes = [sc] if sc is not None else access.listed()
    for one in scopes:
        for run in store.list_runs(one, state=RunState.FAILED, since=since, limit=PAGE * 4):
            failures[run.reason or "-"] += 1
    rows = [[esc(reason), esc(n)] for reason, n in failures.most_common()]
    shown = ", ".join(str(s) for s in scopes) or "pick a scope"
    parts.append(
        f"<h2>Failures of the last 24 h by reason ({esc(shown)})</h2>"
        + scope_picker(access, sc, "/dashboard/")
        + table(["reason", "runs"], rows)
    )
    return "".join(parts)


def routines_page(store: Store, access: Access, sc: Scope | None, q: Mapping[str, str]) -> str:
    picker = scope_picker(access, sc, "/dashboard/routines")
    if sc is None:
        return picker + '<p class="note">pick a scope</p>'
    kind, state, after = q.get("kind") or None, q.get("state") or None, q.get("after") or None
    shown: list[Routine] = []
    more = False
    for _ in range(SCAN_PAGES):
        page = store.list_routines(sc, include_deleted=state == "deleted", limit=PAGE, after=after)
        shown += [r for r in page if (kind is None or r.kind == kind) and (state is None or routine_state(r) == state)]
        if len(page) < PAGE:
            break
        after = page[-1].routine_id
        if len(shown) >= PAGE:
            more = True
            break
    rows = []
    for r in shown:
        last = store.list_runs(sc, routine_id=r.routine_id, limit=1)
        outcome = f"{last[0].state} ({last[0].reason or '-'})" if last else None
        rows.append(
            [
                link(routine_href(r), r.routine_id),
                esc(r.kind),
                esc(schedule_words(r.schedule)),
                f"<code>{esc(dict(r.schedule))}</code>",
                esc(routine_state(r)),
                instant(r.next_due_at),
                in_zone(r.next_due_at, r.schedule),
                esc(outcome),
                esc(r.consecutive_failures),
                esc(r.paused_reason),
            ]
        )
    filters = (
        f'<form method="get">{_hidden_scope(sc)}kind <input name="kind" value="{esc(kind or "")}"> '
        f'state <select name="state">{_options(("", *ROUTINE_STATES), state or "")}</select> '
        "<button>filter</button></form>"
    )
    href = url("/dashboard/routines", scope=str(sc), kind=kind, state=state, after=after)
    nxt = link(href, "next page") if more else ""
    headers = [
        "id",
        "kind",
        "schedule",
        "JSON",
        "state",
        "next fire (UTC)",
        "next fire (its zone)",
        "last outcome",
        "streak",
        "paused reason",
    ]
    return picker + filters + table(headers, rows, empty="no routine") + nxt


def _hidden_scope(sc: Scope) -> str:
    return f'<input type="hidden" name="scope" value="{esc(str(sc))}">'


def _options(values: tuple[str, ...], chosen: str) -> str:
    return "".join(
        f'<option value="{esc(v)}"{" selected" if v == chosen else ""}>{esc(v or "any")}</option>' for v in values
    )


def blocking_run(store: Store, sc: Scope, routine_id: str) -> RunRecord | None:
    for state in sorted(NON_TERMINAL):
        found = store.list_runs(sc, routine_id=routine_id, state=state, limit=1)
        if found:
            return found[0]
    return None
