"""The dashboard's routine page, ledger and stuck runs (read pages; the actions link from here)."""

from __future__ import annotations

from datetime import datetime

from alma_schedule.dashboard.auth import Access
from alma_schedule.dashboard.html import esc, instant, link, table, url
from alma_schedule.dashboard.views import (
    RUN_HEADERS,
    blocking_run,
    in_zone,
    policies_words,
    routine_state,
    run_cells,
    schedule_words,
)
from alma_schedule.dashboard.views_history import HISTORY_ROWS, history_section
from alma_schedule.dashboard.views_timeline import RUNS, next_section, runs_section, what_it_will_do
from alma_schedule.model import TERMINAL, Routine, RunRecord, Scope
from alma_schedule.model.events import RoutineEvent
from alma_schedule.policies import missed
from alma_schedule.settings import Settings
from alma_schedule.stores.base import Store

ACTIONS = ("pause", "resume", "enable", "disable", "trigger")


def action_href(action: str, r: Routine | RunRecord) -> str:
    run = r.run_id if isinstance(r, RunRecord) else None
    return url(f"/dashboard/act/{action}", scope=f"{r.org}/{r.uid}", routine=r.routine_id, run=run)


def routine_page(store: Store, settings: Settings, access: Access, r: Routine, now: datetime) -> str:
    def events(r: Routine) -> list[RoutineEvent]:
        return store.routine_events(r.scope, r.routine_id, limit=5 * HISTORY_ROWS)

    fields = [
        ("scope", esc(str(r.scope))),
        ("kind", esc(r.kind)),
        ("schedule", esc(schedule_words(r.schedule))),
        ("schedule JSON", f"<code>{esc(dict(r.schedule))}</code>"),
        ("policies", esc(policies_words(r.schedule))),
        ("state", esc(routine_state(r))),
        ("what it will do", esc(what_it_will_do(r, now) or "fire as scheduled (next fires below)")),
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
    parts.append(next_section(r, now))  # what it will do: its next fires, or why none (views_timeline.py)
    blocking = blocking_run(store, r.scope, r.routine_id)
    if blocking is not None:
        parts.append("<h2>Blocking run</h2>" + table(RUN_HEADERS, [run_cells(blocking)]))
    last = store.list_runs(r.scope, routine_id=r.routine_id, limit=20)
    parts.append(runs_section(r, store.list_runs(r.scope, routine_id=r.routine_id, limit=RUNS), events(r), now))
    parts.append("<h2>Last runs</h2>" + table(RUN_HEADERS, [run_cells(x) for x in last], empty="no run yet"))
    ledger = url("/dashboard/ledger", scope=str(r.scope), routine=r.routine_id)
    parts.append(f"<p>{link(ledger, 'the whole ledger of this routine')}</p>")
    parts.append(history_section(store, r.scope, r.routine_id))
    return "".join(parts)


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
