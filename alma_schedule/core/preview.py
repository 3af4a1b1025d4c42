"""Upcoming fires with their local reading and DST notes (for ``schedule next``).

``dst_note`` is set when a fire's UTC offset differs from the previous fire's
(``DST: offset -05:00 → -04:00``) and when a fixed-time cron fire was shifted out of a
spring-forward gap (``shifted: 02:30 does not exist``); both parts are joined by ``; ``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from alma_schedule.core.bounds import bounded_next_fires
from alma_schedule.core.fires import as_schedule, gap_walls, latest_fire
from alma_schedule.core.policy import DEFAULT_POLICY, SchedulePolicy
from alma_schedule.core.types import Cron, ScheduleValue, to_epoch
from alma_schedule.core.zones import format_offset, get_zone


@dataclass(frozen=True, slots=True)
class FirePreview:
    """One upcoming fire: the UTC instant, its local reading in ``zone`` and an optional DST note."""

    utc: datetime
    local: datetime
    zone: str
    dst_note: str | None = None


def _offset(local: datetime) -> int:
    off = local.utcoffset()
    return 0 if off is None else off // timedelta(seconds=1)


def _hhmm(wall: int) -> str:
    rest = wall % 86400
    return f"{rest // 3600:02d}:{rest % 3600 // 60:02d}"


def preview_fires(
    schedule: ScheduleValue,
    registered_at: datetime,
    after: datetime,
    n: int,
    *,
    policy: SchedulePolicy = DEFAULT_POLICY,
) -> list[FirePreview]:
    """The next ``n`` fires after ``after`` as :class:`FirePreview` (zone ``UTC`` for every/at),
    inside ``policy``'s bounds (``not_before`` / ``not_after``: :mod:`.bounds`)."""
    sched = as_schedule(schedule)
    fires = bounded_next_fires(sched, registered_at, after, n, policy)
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
    return out
