"""The dashboard's routine page, ledger and stuck runs (read pages; the actions link from here)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from alma_schedule.core import parse_schedule, preview_fires
from alma_schedule.dashboard.auth import Access
from alma_schedule.dashboard.html import esc, instant, link, table, url
from alma_schedule.dashboard.views import (
    PAGE,
    RUN_HEADERS,
    SCAN_PAGES,
    blocking_run,
    in_zone,
    policies_words,
    routine_state,
    run_cells,
    schedule_words,
    scope_picker,
)
from alma_schedule.errors import AlmaScheduleError, InvalidInput
from alma_schedule.model import TERMINAL, Routine, RunRecord, Scope
from alma_schedule.policies import missed
from alma_schedule.settings import Settings
from alma_schedule.stores.base import Store

ACTIONS = ("pause", "resume", "enable", "disable", "trigger")


def action_href(action: str, r: Routine | RunRecord) -> str:
    run = r.run_id if isinstance(r, RunRecord) else None
    return url(f"/dashboard/act/{action}", scope=f"{r.org}/{r.uid}", routine=r.routine_id, run=run)


def routine_page(store: Store, settings: Settings, access: Access, r: Routine, now: datetime) -> str:
    fields = [
        ("scope", esc(str(r.scope))),
        ("kind", esc(r.kind)),
        ("schedule", esc(schedule_words(r.schedule))),
        ("schedule JSON", f"<code>{esc(dict(r.schedule))}</code>"),
        ("policies", esc(policies_words(r.schedule))),
        ("state", esc(routine_state(r))),
        ("paused reason", esc(r.paused_reason)),
        ("next fire (UTC)", instant(r.next_due_at)),
        ("next fire (its zone)", in_zone(r.next_due_at, r.schedule)),
        ("cursor (last fire)", instant(r.last_fire)),
        ("missed fires (never claimed)", esc(missed.shown(r.fires_missed, r.fires_missed_capped))),
        ("failure streak", esc(r.consecutive_failures)),
        ("planning error", esc(r.last_error)),
        ("revision", esc(r.config_revision)),
        ("definition", f"<code>{esc(dict(r.definition))}</code>"),
    ]
    parts = [table(["field", "value"], [[esc(k), v] for k, v in fields])]
    if not access.read_only and r.deleted_at is None:
        parts.append("<p>" + " · ".join(link(action_href(a, r), a) for a in ACTIONS) + "</p>")
    try:
        start = max(now.replace(microsecond=0), r.last_fire or r.registered_at)
        fires = preview_fires(parse_schedule(dict(r.schedule)), r.registered_at, start, 10)
        rows = [[instant(p.utc), esc(p.local.isoformat()), esc(p.zone), esc(p.dst_note or "")] for p in fires]
        parts.append("<h2>Next fires</h2>" + table(["UTC", "local", "zone", "DST note"], rows, empty="no next fire"))
    except AlmaScheduleError as exc:
        parts.append(f'<p class="err">the schedule cannot be previewed: {esc(exc)}</p>')
    blocking = blocking_run(store, r.scope, r.routine_id)
    if blocking is not None:
        parts.append("<h2>Blocking run</h2>" + table(RUN_HEADERS, [run_cells(blocking)]))
    last = store.list_runs(r.scope, routine_id=r.routine_id, limit=20)
    parts.append("<h2>Last runs</h2>" + table(RUN_HEADERS, [run_cells(x) for x in last], empty="no run yet"))
    ledger = url("/dashboard/ledger", scope=str(r.scope), routine=r.routine_id)
    parts.append(f"<p>{link(ledger, 'the whole ledger of this routine')}</p>")
    return "".join(parts)


def _instant_arg(q: Mapping[str, str], name: str) -> datetime | None:
    text = (q.get(name) or "").strip()
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.upper().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"{name} {text!r} is not an ISO-8601 instant (e.g. 2026-12-01T08:00:00Z)") from None
    if moment.tzinfo is None:
        raise InvalidInput(f"{name} {text!r} needs a UTC offset (e.g. Z)")
    return moment


def _before_arg(q: Mapping[str, str]) -> tuple[datetime, str] | None:
    at, run = q.get("before_at"), q.get("before_run")
    if not at or run is None:
        return None
    moment = _instant_arg({"x": at}, "x")
    assert moment is not None
    return (moment, run)


def ledger_page(store: Store, access: Access, sc: Scope | None, q: Mapping[str, str]) -> str:
    """Runs of a scope newest first, paged by the key ``(fire_at, run_id)`` of the last row shown."""
    picker = scope_picker(access, sc, "/dashboard/ledger")
    if sc is None:
        return picker + '<p class="note">pick a scope</p>'
    routine, state, reason = q.get("routine") or None, q.get("state") or None, q.get("reason") or None
    since, until = _instant_arg(q, "since"), _instant_arg(q, "until")
    before = _before_arg(q)
    if before is None and until is not None:
        before = (until, "\U0010ffff")  # inclusive of ``until``: every run id sorts below this
    rows: list[RunRecord] = []
    more = False
    for _ in range(SCAN_PAGES):
        page = store.list_runs(sc, routine_id=routine, state=state, since=since, limit=PAGE, before=before)
        for run in page:
            if reason is None or run.reason == reason:
                rows.append(run)
                if len(rows) == PAGE:
                    break
        if len(page) < PAGE:
            break
        last = rows[-1] if len(rows) == PAGE else page[-1]
        before = (last.fire_at, last.run_id)
        if len(rows) == PAGE:
            more = True
            break
    filters = (
        f'<form method="get"><input type="hidden" name="scope" value="{esc(str(sc))}">'
        + "".join(
            f'{n} <input name="{n}" value="{esc(q.get(n, ""))}"> '
            for n in ("routine", "state", "reason", "since", "until")
        )
        + "<button>filter</button></form>"
    )
    nxt = ""
    if more and before is not None:
        href = url(
            "/dashboard/ledger",
            scope=str(sc),
            routine=routine,
            state=state,
            reason=reason,
            since=q.get("since"),
            until=q.get("until"),
            before_at=before[0].isoformat(),
            before_run=before[1],
        )
        nxt = link(href, "older runs")
    return picker + filters + table(RUN_HEADERS, [run_cells(x) for x in rows], empty="no run") + nxt


def record_advice(run: RunRecord) -> str:
    """What ``runs record`` does to this run (the operator's reconciliation)."""
    money = f"; its reservation of {run.reserved_micros} micro-USD is settled" if run.reserved_micros else ""
    return (
        f"record moves it from {run.state} to the outcome you give (e.g. failed or completed) with your "
        f"reason, in one compare-and-set{money}; the streak is untouched and nothing is re-sent"
    )


def stuck_page(store: Store, settings: Settings, access: Access, now: datetime) -> str:
    """Blocked and stuck runs (system reads, shown filtered to the dashboard's scopes)."""
    limit = 200
    found: dict[str, RunRecord] = {}
    for run in [
        *store.blocked(now, settings.run_time_limit, limit),
        *store.stuck(now, 2 * settings.run_time_limit, limit),
    ]:
        if run.state not in TERMINAL and access.allows(Scope(run.org, run.uid)):
            found.setdefault(str(run.key), run)
    rows = []
    for run in sorted(found.values(), key=lambda x: (x.state_at, str(x.key))):
        act = link(action_href("record", run), "record…") if not access.read_only else ""
        rows.append([*run_cells(run, scoped=False), instant(run.state_at), esc(record_advice(run)), act])
    headers = ["scope", *RUN_HEADERS, "in state since", "what record would do", ""]
    return table(headers, rows, empty="no blocked or stuck run")


def bad_filter(exc: InvalidInput) -> str:
    return f'<p class="err">{esc(exc)}</p>'
