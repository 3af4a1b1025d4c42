"""Upcoming fires with their local reading and DST notes (for ``schedule next``).

docs/architecture.md, section "The modules, in detail" (core/preview.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from alma_schedule.core.bounds import bounded_next_fires
from alma_schedule.core.fires import as_schedule, gap_walls, latest_fire
from alma_schedule.core.policy import DEFAULT_POLICY, SchedulePolicy
from alma_schedule.core.solar import days_without
from alma_schedule.core.types import After, Cron, ScheduleValue, Solar, to_epoch
from alma_schedule.core.zones import format_offset, get_zone


@dataclass(frozen=True, slots=True)
class FirePreview:
    """One upcoming fire: the UTC instant it comes due, its local reading in ``zone``, an optional
    DST note, and with ``due`` (see :func:`preview_fires`) the nominal fire instant and the jitter."""

    utc: datetime
    local: datetime
    zone: str
    dst_note: str | None = None
    fire: datetime | None = None
    jitter: timedelta = timedelta(0)

    @property
    def note(self) -> str | None:
        """The DST note and, with a jitter, ``jitter +17s (fire 09:00:00Z)``, joined by ``; ``."""
        parts = [self.dst_note] if self.dst_note else []
        if self.jitter and self.fire is not None:
            parts.append(f"jitter +{int(self.jitter.total_seconds())}s (fire {self.fire.strftime('%H:%M:%SZ')})")
        return "; ".join(parts) or None


def _offset(local: datetime) -> int:
    off = local.utcoffset()
    return 0 if off is None else off // timedelta(seconds=1)


def _hhmm(wall: int) -> str:
    rest = wall % 86400
    return f"{rest // 3600:02d}:{rest % 3600 // 60:02d}"


def _jittered(p: FirePreview, due: Callable[[datetime], datetime] | None) -> FirePreview:
    if due is None:
        return p
    when = due(p.utc)
    return FirePreview(when, when.astimezone(p.local.tzinfo), p.zone, p.dst_note, p.utc, when - p.utc)


def preview_fires(
    schedule: ScheduleValue,
    registered_at: datetime,
    after: datetime,
    n: int,
    *,
    policy: SchedulePolicy = DEFAULT_POLICY,
    due: Callable[[datetime], datetime] | None = None,
) -> list[FirePreview]:
    """The next ``n`` fires after ``after`` as :class:`FirePreview` (zone ``UTC`` for every/at; a solar
    fire after days without its event says how many),
    inside ``policy``'s bounds (``not_before`` / ``not_after``: :mod:`.bounds`, on the nominal
    instants); ``due`` maps a fire to its due instant (a routine's jitter)."""
    sched = as_schedule(schedule)
    if isinstance(sched, After):  # one fire known ahead: the first, at registration (or not_before)
        first = bounded_next_fires(sched, registered_at, registered_at - timedelta(seconds=1), min(n, 1), policy)
        note = f"the first fire; each later one {sched.to_json()['after']} after the previous run ends"
        return [_jittered(FirePreview(f, f, "UTC", note), due) for f in first]
    fires = bounded_next_fires(sched, registered_at, after, n, policy)
    return [_jittered(p, due) for p in _previews(sched, registered_at, fires)]


def _previews(sched: ScheduleValue, registered_at: datetime, fires: list[datetime]) -> list[FirePreview]:
    if isinstance(sched, Solar):
        return [_solar(sched, f) for f in fires]
    if not isinstance(sched, Cron):
        return [FirePreview(f, f, "UTC", None) for f in fires]
    zone = get_zone(sched.zone)
    out: list[FirePreview] = []
    prev_off: int | None = None
    if fires:
        before = latest_fire(sched, registered_at, fires[0] - timedelta(seconds=1))
        if before is not None:
            prev_off = _offset(before.astimezone(zone))
    for f in fires:
        local = f.astimezone(zone)
        off = _offset(local)
        notes: list[str] = []
        if prev_off is not None and off != prev_off:
            notes.append(f"DST: offset {format_offset(prev_off)} → {format_offset(off)}")
        walls, _ = gap_walls(sched, to_epoch(f, "fire"))
        if walls:
            shown = ", ".join(_hhmm(w) for w in walls)
            verb = "does" if len(walls) == 1 else "do"
            notes.append(f"shifted: {shown} {verb} not exist")
        out.append(FirePreview(f.astimezone(UTC), local, sched.zone, "; ".join(notes) or None))
        prev_off = off
    if sched.calendar is not None and fires:
        out = _with_calendar(sched, out)
    return out


def _with_calendar(sched: Cron, previews: list[FirePreview]) -> list[FirePreview]:
    """The rolled and skipped fires of a cron on a business calendar, named with the holiday."""
    from alma_schedule.core.calendar import business_days
    from alma_schedule.core.calendar_fires import cal_latest, calendar_notes

    days, roll = business_days(str(sched.calendar)), str(sched.roll)
    instants = [to_epoch(p.utc, "fire") for p in previews]
    previous = cal_latest(sched.expr, sched.tz, days, roll, instants[0] - 1)  # the skips since it are shown
    start = instants[0] - 1 - 40 * 86400 if previous is None else previous
    texts = calendar_notes(sched.expr, sched.tz, days, roll, start, instants)
    return [
        p if not t else FirePreview(p.utc, p.local, p.zone, "; ".join(x for x in (p.dst_note, t) if x))
        for p, t in zip(previews, texts, strict=True)
    ]


def _solar(sched: Solar, fire: datetime) -> FirePreview:
    first, count = days_without(sched.event, sched.lat, sched.lon, to_epoch(fire, "fire"))
    note = None
    if count:
        start, end = date.fromordinal(_EPOCH_DAY + first), date.fromordinal(_EPOCH_DAY + first + count - 1)
        note = f"first {sched.event} after {count} days without one ({start} to {end}, polar day or night)"
    return FirePreview(fire, fire.astimezone(get_zone(sched.zone)), sched.zone, note)


_EPOCH_DAY = date(1970, 1, 1).toordinal()
