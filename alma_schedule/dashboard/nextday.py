"""The next 24 h of the fleet (or a scope): fires per minute computed from the schedules with the
tick's own pure functions (:func:`alma_schedule.policies.plan.schedule_of` / ``policy_for`` and
:func:`alma_schedule.core.bounds.bounded_next_fire`), the zones' DST changes within the day, and the
busiest minutes named in their zone ("02:00 Europe/Lisbon: 1,204 fires").

It is computed from a bounded sample, and says which: the first :data:`SAMPLE` routines in key
order of the ranges the user may see, at most :data:`PER_ROUTINE` fires each and :data:`FIRES_CAP`
in all (a fleet of 1,000,000 routines reads :data:`SAMPLE` rows, never all).

docs/architecture.md, section "The modules, in detail" (dashboard/nextday.py).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from alma_schedule.core.bounds import bounded_next_fire
from alma_schedule.core.types import After
from alma_schedule.dashboard import charts
from alma_schedule.dashboard.auth import Access
from alma_schedule.dashboard.fleet import BUDGET, _ranges
from alma_schedule.dashboard.html import esc, table
from alma_schedule.errors import AlmaScheduleError
from alma_schedule.model import Routine, Scope
from alma_schedule.policies.plan import policy_for, schedule_of
from alma_schedule.stores.base import Store

__all__ = ["FIRES_CAP", "PER_ROUTINE", "SAMPLE", "NextDay", "dst_changes", "next_day", "next_day_chart"]

SAMPLE = BUDGET
PER_ROUTINE = 1440
FIRES_CAP = 100_000
MINUTES = 1440


@dataclass
class NextDay:
    start: datetime
    counts: list[int] = field(default_factory=lambda: [0] * MINUTES)
    by_zone: Counter[tuple[int, str]] = field(default_factory=Counter)
    read: int = 0
    active: int = 0
    fires: int = 0
    more_routines: bool = False
    capped: bool = False
    unreadable: int = 0


def _zone(r: Routine) -> str:
    tz = r.schedule.get("tz")
    return tz if isinstance(tz, str) and tz else "UTC"


def _fires(r: Routine, start: datetime, end: datetime, cap: int) -> list[datetime]:
    """The routine's fires in ``[start, end)`` (at most ``cap``), as the tick computes them."""
    schedule = schedule_of(r)
    if isinstance(schedule, After):  # its next fire is the end of a run: only the stored one is known
        due = r.next_due_at
        return [due] if due is not None and start <= due < end else []
    policy = policy_for(r)
    out: list[datetime] = []
    cursor = start - timedelta(microseconds=1)
    while len(out) < cap:
        fire = bounded_next_fire(schedule, r.registered_at, cursor, policy)
        if fire is None or fire >= end:
            break
        out.append(fire)
        cursor = fire
    return out


def next_day(store: Store, access: Access, scope: Scope | None, now: datetime) -> NextDay:
    """Fires per minute of the 24 h from ``now``'s minute, over the bounded sample (module docstring)."""
    start = now.replace(second=0, microsecond=0)
    end = start + timedelta(minutes=MINUTES)
    day = NextDay(start)
    for org, uid in _ranges(access, scope):
        if day.read >= SAMPLE:
            break
        rows = store.fleet_routines(limit=SAMPLE - day.read + 1, org=org, uid=uid)
        if len(rows) > SAMPLE - day.read:
            rows, day.more_routines = rows[: SAMPLE - day.read], True
        day.read += len(rows)
        for r in rows:
            if r.inactive_reason is not None:
                continue
            day.active += 1
            left = FIRES_CAP - day.fires
            if left <= 0:
                day.capped = True
                break
            try:
                fires = _fires(r, start, end, min(PER_ROUTINE, left))
            except (AlmaScheduleError, ValueError, TypeError):
                day.unreadable += 1
                continue
            zone = _zone(r)
            for f in fires:
                i = int((f - start).total_seconds() // 60)
                day.counts[i] += 1
                day.by_zone[(i, zone)] += 1
            day.fires += len(fires)
    return day


def dst_changes(zones: set[str], start: datetime, end: datetime) -> list[tuple[datetime, str]]:
    """Each zone's UTC offset changes in ``[start, end)``, to the minute, named."""
    out: list[tuple[datetime, str]] = []
    for name in sorted(zones):
        try:
            tz = ZoneInfo(name)
        except (ValueError, KeyError):
            continue
        step = timedelta(minutes=30)
        at = start
        while at < end:
            nxt = min(at + step, end)
            if at.astimezone(tz).utcoffset() != nxt.astimezone(tz).utcoffset():
                lo, hi = at, nxt  # the change is in (lo, hi]: bisect to the minute
                while hi - lo > timedelta(minutes=1):
                    mid = lo + (hi - lo) / 2
                    mid = mid.replace(second=0, microsecond=0)
                    if mid <= lo:
                        break
                    same = lo.astimezone(tz).utcoffset() == mid.astimezone(tz).utcoffset()
                    lo, hi = (mid, hi) if same else (lo, mid)
                old, new = lo.astimezone(tz).utcoffset(), hi.astimezone(tz).utcoffset()
                assert old is not None and new is not None
                wall = hi.replace(tzinfo=None)
                text = (
                    f"DST {name} {charts.hhmm(hi)} UTC: {(wall + old).strftime('%H:%M')} → "
                    f"{(wall + new).strftime('%H:%M')} local ({_offset(old)} → {_offset(new)})"
                )
                out.append((hi, text))
            at = nxt
    return out


def _offset(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _fires_text(n: int) -> str:
    return f"{n:,} fire" if n == 1 else f"{n:,} fires"


def _local(start: datetime, minute: int, zone: str) -> str:
    at = start + timedelta(minutes=minute)
    try:
        return at.astimezone(ZoneInfo(zone)).strftime("%H:%M")
    except (ValueError, KeyError):
        return charts.hhmm(at)


def next_day_chart(day: NextDay, what: str) -> str:
    """The heat strip with its sample named, the DST changes and the top minutes."""
    end = day.start + timedelta(minutes=MINUTES)
    zones = {z for _, z in day.by_zone}
    notes = dst_changes(zones, day.start, end)
    busiest = [key for key, n in day.by_zone.most_common(5) if n > 0]
    changed = {text.split(" ")[1] for _, text in notes}
    for zone in sorted(changed):  # the busiest minute of each zone whose DST changes within the day
        found = max(((n, -i) for (i, z), n in day.by_zone.items() if z == zone), default=None)
        if found is not None and (-found[1], zone) not in busiest:
            busiest.append((-found[1], zone))
    top = [f"{_local(day.start, i, zone)} {zone}: {_fires_text(day.by_zone[(i, zone)])}" for i, zone in busiest]
    sample = f"computed from the first {day.read:,} routines in key order of {what}"
    sample += (
        f" (a sample: there are more than {day.read:,})" if day.more_routines else " (all of them)"
    ) + f"; {day.active:,} active, {day.fires:,} fires"
    if day.capped:
        sample += f"; stopped at {FIRES_CAP:,} fires"
    if day.unreadable:
        sample += f"; {day.unreadable:,} schedules not read"
    title = f"Fires per minute, the next 24 h from {charts.hhmm(day.start)} UTC ({what}): {day.fires:,} fires"
    hours = Counter[int]()
    for i, n in enumerate(day.counts):
        hours[i // 60] += n
    fallback = table(
        ["hour from (UTC)", "fires"],
        [
            [esc((day.start + timedelta(hours=h)).strftime("%Y-%m-%d %H:%M")), esc(f"{hours[h]:,}")]
            for h in range(24)
            if hours[h]
        ],
        empty="no fire in the next 24 h",
    )
    named = "".join(f"<li>{esc(t)}</li>" for t in [*(t for _, t in notes), *top])
    return (
        charts.heat_strip(title, day.start, day.counts, notes, fallback)
        + f'<p class="note">{esc(sample)}</p>'
        + (f'<ul class="named">{named}</ul>' if named else "")
    )
