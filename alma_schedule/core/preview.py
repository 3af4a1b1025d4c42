"""Upcoming fires with their local reading and DST notes (for ``schedule next``).

``dst_note`` is set when a fire's UTC offset differs from the previous fire's
(``DST: offset -05:00 → -04:00``) and when a fixed-time cron fire was shifted out of a
spring-forward gap (``shifted: 02:30 does not exist``); both parts are joined by ``; ``.

With ``due`` (a routine's jitter: :func:`alma_schedule.engine.decide.due_of`), ``utc`` and ``local``
are the DUE instant ``f + o(f)`` (what a tick will act on), ``fire`` the nominal instant (the run
id) and ``jitter`` the difference; the DST note is about the nominal fire.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from alma_schedule.core.bounds import bounded_next_fires
from alma_schedule.core.fires import as_schedule, gap_walls, latest_fire
from alma_schedule.core.policy import DEFAULT_POLICY, SchedulePolicy
from alma_schedule.core.types import Cron, ScheduleValue, to_epoch
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
    """The next ``n`` fires after ``after`` as :class:`FirePreview` (zone ``UTC`` for every/at),
    inside ``policy``'s bounds (``not_before`` / ``not_after``: :mod:`.bounds`, on the nominal
    instants); ``due`` maps a fire to its due instant (a routine's jitter)."""
    sched = as_schedule(schedule)
    fires = bounded_next_fires(sched, registered_at, after, n, policy)
    return [_jittered(p, due) for p in _previews(sched, registered_at, fires)]


def _previews(sched: ScheduleValue, registered_at: datetime, fires: list[datetime]) -> list[FirePreview]:
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
