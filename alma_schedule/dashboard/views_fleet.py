"""The fleet pages: Scopes (each scope's routines by state, blocked runs, failures of the last 24 h),
Routines and Ledger across the scopes the user may see, with a scope column, filters and keyset
paging (:mod:`alma_schedule.dashboard.fleet`: every listing bounded, "narrow the filter" past it).

docs/architecture.md, section "The modules, in detail" (dashboard/views_fleet.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from alma_schedule.dashboard import fleet
from alma_schedule.dashboard.auth import Access
from alma_schedule.dashboard.fleet import BUDGET, Listing, RoutineFilter, RunFilter
from alma_schedule.dashboard.html import attr, esc, instant, link, table, url
from alma_schedule.dashboard.views import (
    ROUTINE_STATES,
    RUN_HEADERS,
    in_zone,
    routine_href,
    routine_state,
    run_cells,
    schedule_words,
)
from alma_schedule.errors import InvalidInput
from alma_schedule.model import Routine, RunState, Scope
from alma_schedule.settings import Settings
from alma_schedule.stores.base import Store

__all__ = ["ledger_page", "routines_page", "scopes_page"]

#: Scopes per page of the Scopes page; each scope's counts read at most :data:`SCOPE_ROWS` rows of
#: each table, so a page reads at most :data:`~alma_schedule.dashboard.fleet.BUDGET` (20 x 50).
SCOPES_PAGE = 20
SCOPE_ROWS = BUDGET // SCOPES_PAGE


def _text(q: Mapping[str, str], name: str) -> str | None:
    return (q.get(name) or "").strip() or None


def _instant(q: Mapping[str, str], name: str) -> datetime | None:
    text = _text(q, name)
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text.upper().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"{name} {text!r} is not an ISO-8601 instant (e.g. 2026-12-01T08:00:00Z)") from None
    if moment.tzinfo is None:
        raise InvalidInput(f"{name} {text!r} needs a UTC offset (e.g. Z)")
    return moment


def _choice(q: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> str | None:
    value = _text(q, name)
    if value is not None and value not in allowed:
        raise InvalidInput(f"{name} {value!r} is not one of {', '.join(allowed)}")
    return value


def _field(name: str, value: str | None, label: str | None = None) -> str:
    return f'{esc(label or name)} <input name="{attr(name)}" value="{attr(value or "")}"> '


def _select(name: str, values: tuple[str, ...], chosen: str | None) -> str:
    opts = "".join(
        f'<option value="{attr(v)}"{" selected" if v == (chosen or "") else ""}>{esc(v or "any")}</option>'
        for v in ("", *values)
    )
    return f'{esc(name)} <select name="{attr(name)}">{opts}</select> '


def stopped_note(listing: Listing[Any], more_href: str | None) -> str:
    """What a listing stopped by its budget says ("narrow the filter"), with a link to read on."""
    if not listing.stopped:
        return ""
    more = f" or {link(more_href, 'read the next rows')}" if more_href else ""
    return (
        f'<p class="err">read {listing.read:,} rows (20 pages) without filling a page: '
        f"narrow the filter (a scope, an id prefix within a scope){more}</p>"
    )


def _scope_text(sc: Scope | None) -> str | None:
    return None if sc is None else str(sc)


# ------------------------------------------------------------------ routines


def routines_page(store: Store, access: Access, sc: Scope | None, q: Mapping[str, str]) -> str:
    f = RoutineFilter(sc, _text(q, "prefix"), _text(q, "kind"), _choice(q, "state", ROUTINE_STATES))
    after = None
    if q.get("after_org") and q.get("after_uid") and q.get("after_id") is not None:
        after = (q["after_org"], q["after_uid"], q["after_id"])
    listing = fleet.fleet_routines(store, access, f, after)
    rows = []
    for r in listing.rows:
        last = store.list_runs(r.scope, routine_id=r.routine_id, limit=1)
        outcome = f"{last[0].state} ({last[0].reason or '-'})" if last else None
        rows.append(
            [
                link(url("/dashboard/routines", scope=str(r.scope)), str(r.scope)),
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
    base = {"scope": _scope_text(sc), "prefix": f.prefix, "kind": f.kind, "state": f.state}
    filters = (
        '<form method="get">'
        + _field("scope", _scope_text(sc), "scope (ORG/UID)")
        + _field("prefix", f.prefix, "id prefix")
        + _field("kind", f.kind)
        + _select("state", ROUTINE_STATES, f.state)
        + "<button>filter</button></form>"
    )
    nxt = ""
    if listing.after is not None:
        org, uid, rid = (str(x) for x in listing.after)
        href = url("/dashboard/routines", **base, after_org=org, after_uid=uid, after_id=rid)
        nxt = stopped_note(listing, href) if listing.stopped else link(href, "next page")
    headers = ["scope", "id", "kind", "schedule", "JSON", "state", "next fire (UTC)", "next fire (its zone)"]
    headers += ["last outcome", "streak", "paused reason"]
    shown = "the whole fleet" if access.fleet and sc is None else (str(sc) if sc else "your scopes")
    return (
        f'<p class="note">routines of {esc(shown)}, in key order (scope, id)</p>'
        + filters
        + table(headers, rows, empty="no routine")
        + nxt
    )


# ------------------------------------------------------------------ ledger


def ledger_page(store: Store, access: Access, sc: Scope | None, q: Mapping[str, str]) -> str:
    """Runs scope by scope (key order), each scope newest first by ``(fire_at, run_id, routine_id)``;
    the next page starts after the last row's key (two routines sharing an instant never straddle
    a page unseen)."""
    f = RunFilter(
        sc,
        _text(q, "routine"),
        _text(q, "prefix"),
        _choice(q, "state", tuple(s.value for s in RunState)),
        _text(q, "reason"),
        _instant(q, "since"),
        _instant(q, "until"),
    )
    after = None
    at, run = _instant(q, "before_at"), q.get("before_run")
    if at is not None and run is not None:
        org, uid = q.get("before_org"), q.get("before_uid")
        if not (org and uid) and sc is not None:
            org, uid = sc.org, sc.uid
        if org and uid:
            after = (org, uid, at, run, q.get("before_routine") or "\U0010ffff")
    listing = fleet.fleet_runs(store, access, f, after)
    filters = (
        '<form method="get">'
        + _field("scope", _scope_text(sc), "scope (ORG/UID)")
        + "".join(_field(n, q.get(n)) for n in ("routine", "prefix", "state", "reason", "since", "until"))
        + "<button>filter</button></form>"
    )
    nxt = ""
    if listing.after is not None:
        b_org, b_uid, fire_at, run_id, rid = listing.after
        assert isinstance(fire_at, datetime)
        href = url(
            "/dashboard/ledger",
            scope=_scope_text(sc),
            routine=f.routine,
            prefix=f.prefix,
            state=f.state,
            reason=f.reason,
            since=q.get("since"),
            until=q.get("until"),
            before_org=b_org,
            before_uid=b_uid,
            before_at=fire_at.isoformat(),
            before_run=run_id,
            before_routine=rid,
        )
        nxt = stopped_note(listing, href) if listing.stopped else link(href, "older runs")
    note = '<p class="note">runs scope by scope (key order), each scope newest first</p>'
    headers = ["scope", *RUN_HEADERS]
    return note + filters + table(headers, [run_cells(x, scoped=False) for x in listing.rows], empty="no run") + nxt


# ------------------------------------------------------------------ scopes


def _count_link(n: int, capped: bool, href: str) -> str:
    text = f"{n:,}+" if capped else f"{n:,}"
    return link(href, text) if n else text


def scopes_page(store: Store, settings: Settings, access: Access, now: datetime, q: Mapping[str, str]) -> str:
    """Each scope the user may see (a page of :data:`SCOPES_PAGE`, key order), its routines by state
    (the first :data:`SCOPE_ROWS` read: "50+" when there are as many), blocked runs and failures of
    the last 24 h, each count a link to the filtered list behind it."""
    after = (q["after_org"], q["after_uid"]) if q.get("after_org") and q.get("after_uid") else None
    scopes: list[Scope] = []
    for sc in fleet.scopes_of(store, access, None, after):
        if after is not None and (sc.org, sc.uid) == after:
            continue
        scopes.append(sc)
        if len(scopes) > SCOPES_PAGE:
            break
    more = len(scopes) > SCOPES_PAGE
    scopes = scopes[:SCOPES_PAGE]
    blocked_runs = store.blocked(now, settings.run_time_limit, BUDGET)
    blocked = Counter((r.org, r.uid) for r in blocked_runs)
    since = (now - timedelta(days=1)).replace(microsecond=0)
    rows = []
    for sc in scopes:
        routines: list[Routine] = store.fleet_routines(org=sc.org, uid=sc.uid, limit=SCOPE_ROWS)
        capped = len(routines) >= SCOPE_ROWS  # "at least": the read stopped at its cap
        states = Counter(routine_state(r) for r in routines)
        recent = store.list_runs(sc, since=since, limit=SCOPE_ROWS)
        failed = sum(1 for r in recent if r.state == RunState.FAILED)
        cells = [link(url("/dashboard/routines", scope=str(sc)), str(sc))]
        for state in ROUTINE_STATES:
            href = url("/dashboard/routines", scope=str(sc), state=state)
            cells.append(_count_link(states[state], capped and states[state] > 0, href))
        cells.append(_count_link(blocked[(sc.org, sc.uid)], len(blocked_runs) >= BUDGET, "/dashboard/stuck"))
        href = url("/dashboard/ledger", scope=str(sc), state=RunState.FAILED, since=since.isoformat())
        cells.append(_count_link(failed, len(recent) >= SCOPE_ROWS, href))
        rows.append(cells)
    headers = ["scope", *ROUTINE_STATES, "blocked runs", "failed (24 h)"]
    nxt = ""
    if more and scopes:
        nxt = link(url("/dashboard/scopes", after_org=scopes[-1].org, after_uid=scopes[-1].uid), "next scopes")
    note = (
        f'<p class="note">scopes in key order, {SCOPES_PAGE} a page; each scope&#x27;s counts read its first '
        f"{SCOPE_ROWS} routines and its {SCOPE_ROWS} latest runs of the last 24 h (&quot;n+&quot;: at least n)</p>"
    )
    return note + table(headers, rows, empty="no scope holds a routine") + nxt
