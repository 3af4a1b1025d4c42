"""The straightforward ``decide`` (``reference_decide``): the algorithm as it was before the tick's
caches, kept verbatim over uncached primitives, for the equivalence tests of the fast path.

Nothing here is cached except the cron grammar (``compile_cron``, a parse) and the zone year tables
(``segment_at``), which the fast path shares: every instant conversion, every fire, every fire id and
every decision is computed afresh, twice per fire where the old code did so.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

from alma_schedule.core import At, Cron, Every, SchedulePolicy, ScheduleValue, parse_schedule, policy_of
from alma_schedule.core.cron_fires import _cron_latest, _cron_next
from alma_schedule.core.types import EPOCH, SECOND, compile_cron
from alma_schedule.errors import InvalidSchedule
from alma_schedule.model import Fire, NotDue, Routine
from alma_schedule.policies import overlap
from alma_schedule.settings import Settings

_TICK = timedelta(microseconds=1)


def to_epoch(value: object, name: str) -> int:
    if not isinstance(value, datetime):
        raise InvalidSchedule(f"{name!r} must be a timezone-aware datetime, got {type(value).__name__}")
    if value.tzinfo is not UTC and value.utcoffset() is None:
        raise InvalidSchedule(
            f"{name!r} must be timezone-aware, got the naive datetime {value.isoformat()} "
            "(naive times are never read as local time)"
        )
    return (value - EPOCH) // SECOND


def _result(u: int | None) -> datetime | None:
    if u is None:
        return None
    try:
        return datetime.fromtimestamp(u, UTC)
    except (ValueError, OSError, OverflowError):
        return None


def latest_fire(sched: ScheduleValue, registered_at: datetime, now: datetime) -> datetime | None:
    r = to_epoch(registered_at, "registered_at")
    n = to_epoch(now, "now")
    if n < r:
        return None
    f: int | None
    if isinstance(sched, Cron):
        spec, key = compile_cron(sched.expr, sched.tz)
        try:
            f = _cron_latest(spec, key, n)
        except (OverflowError, ValueError):
            return None
    elif isinstance(sched, Every):
        step = sched.interval.days * 86400 + sched.interval.seconds
        if n - r < step:
            return None
        f = n - (n - r) % step
    else:
        assert isinstance(sched, At)
        f = to_epoch(sched.when, "at")
        if f > n:
            return None
    if f is None or f < r:
        return None
    return _result(f)


def next_fire(sched: ScheduleValue, registered_at: datetime, after: datetime) -> datetime | None:
    r = to_epoch(registered_at, "registered_at")
    a = max(to_epoch(after, "after"), r - 1)
    f: int | None
    if isinstance(sched, Cron):
        spec, key = compile_cron(sched.expr, sched.tz)
        try:
            f = _cron_next(spec, key, a)
        except (OverflowError, ValueError):
            return None
    elif isinstance(sched, Every):
        step = sched.interval.days * 86400 + sched.interval.seconds
        f = r + step if a < r + step else a + step - (a - r) % step
    else:
        assert isinstance(sched, At)
        f = to_epoch(sched.when, "at")
        if f <= a:
            return None
    return _result(f)


def fire_id(instant: datetime) -> str:
    t = datetime.fromtimestamp(to_epoch(instant, "instant"), UTC)
    return f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}Z"


def jitter_offset(
    org: str, uid: str, routine_id: str, fire: datetime, jitter: timedelta | None, gap: timedelta | None
) -> timedelta:
    if not jitter:
        return timedelta(0)
    bound = jitter if gap is None else min(jitter, gap / 2)
    seconds = int(bound.total_seconds())
    if seconds <= 0:
        return timedelta(0)
    data = "\x00".join((org, uid, routine_id, fire_id(fire))).encode("utf-8")
    return timedelta(seconds=int.from_bytes(hashlib.sha256(data).digest(), "big") % seconds)


def bounded_next_fire(s: ScheduleValue, r: datetime, after: datetime, policy: SchedulePolicy) -> datetime | None:
    start = after
    if policy.not_before is not None and policy.not_before - _TICK > start:
        start = policy.not_before - _TICK
    fire = next_fire(s, r, start)
    if fire is None or (policy.not_after is not None and fire > policy.not_after):
        return None
    return fire


def bounded_latest_fire(s: ScheduleValue, r: datetime, now: datetime, policy: SchedulePolicy) -> datetime | None:
    until = now if policy.not_after is None or policy.not_after >= now else policy.not_after
    fire = latest_fire(s, r, until)
    if fire is None or (policy.not_before is not None and fire < policy.not_before):
        return None
    return fire


def _close(due: datetime, next_due: datetime | None, policy: SchedulePolicy, settings: Settings) -> datetime:
    end = next_due if next_due is not None else due + settings.one_shot_window
    if policy.catch_up is not None:
        end = min(end, due + policy.catch_up)
    if settings.max_catch_up is not None:
        end = min(end, due + settings.max_catch_up)
    return end


def collapsed(
    s: ScheduleValue, r: datetime, last: datetime | None, fire: datetime, policy: SchedulePolicy, left: int | None
) -> int:
    """The fires a claim of ``fire`` collapses (issue 44), walked one by one with the real anchor: the
    fires in the bounds after the cursor (or from the anchor on) and before ``fire``, at most 10,000,
    and with ``max_runs`` at most the claims left but the one claimed."""
    n = 0
    f = bounded_next_fire(s, r, last if last is not None else r - _TICK, policy)
    while f is not None and f < fire and n < 10_000:
        n += 1
        f = bounded_next_fire(s, r, f, policy)
    return n if left is None else min(n, max(left - 1, 0))


def _fire(
    fire: datetime,
    due: datetime,
    expires_at: datetime,
    next_due: datetime | None,
    now: datetime,
    settings: Settings,
    policy: SchedulePolicy,
    fires_missed: int = 0,
) -> Fire:
    return Fire(
        run_id=fire_id(fire),
        fire_at=fire,
        expires_at=expires_at,
        next_due_at=next_due,
        resend_at=now + settings.resend_first,
        missed=now >= expires_at,
        max_runs=policy.max_runs,
        buffer=overlap.buffers(policy.overlap),
        due_at=due,
        fires_missed=fires_missed,
    )


def reference_decide(routine: Routine, now: datetime, settings: Settings) -> Fire | NotDue:
    """``decide`` as it was: every fire computed afresh, the next fire twice."""
    if routine.inactive_reason is not None:
        return NotDue(None)
    schedule = parse_schedule(routine.schedule)
    policy = policy_of(routine.schedule)
    left = None if policy.max_runs is None else max(policy.max_runs - routine.schedule_starts, 0)
    if left == 0:
        return NotDue(None)
    if policy.jitter:
        return _jittered(routine, schedule, policy, now, settings, left)
    anchor = routine.registered_at
    last = routine.last_fire
    fire = bounded_latest_fire(schedule, anchor, now, policy)
    if fire is None or (last is not None and fire <= last):
        after = now if last is None or last < now else last
        return NotDue(bounded_next_fire(schedule, anchor, after, policy))
    following = bounded_next_fire(schedule, anchor, fire, policy)
    expires_at = _close(fire, next_fire(schedule, anchor, fire), policy, settings)
    missed = collapsed(schedule, anchor, last, fire, policy, left)
    return _fire(fire, fire, expires_at, following, now, settings, policy, missed)


def _jittered(
    routine: Routine,
    schedule: ScheduleValue,
    policy: SchedulePolicy,
    now: datetime,
    settings: Settings,
    left: int | None,
) -> Fire | NotDue:
    key = (routine.org, routine.uid, routine.routine_id)
    anchor, last, jitter = routine.registered_at, routine.last_fire, policy.jitter

    def next_of(f: datetime | None) -> datetime | None:
        return None if f is None else next_fire(schedule, anchor, f)

    def due(f: datetime, following: datetime | None) -> datetime:
        gap = None if following is None else following - f
        return f + jitter_offset(*key, f, jitter, gap)

    def due_in_bounds(after: datetime) -> datetime | None:
        first = bounded_next_fire(schedule, anchor, after, policy)
        return None if first is None else due(first, next_of(first))

    def not_due() -> NotDue:
        return NotDue(due_in_bounds(now if last is None or last < now else last))

    fire = bounded_latest_fire(schedule, anchor, now, policy)
    if fire is None:
        return not_due()
    following = next_of(fire)
    fire_due = due(fire, following)
    if fire_due > now:
        pending, pending_due = fire, fire_due
        if last is not None and pending <= last:
            return not_due()
        previous = bounded_latest_fire(schedule, anchor, fire - SECOND, policy)
        if previous is None or (last is not None and previous <= last):
            return NotDue(pending_due)
        previous_due = due(previous, pending)
        window = _close(previous_due, pending_due, policy, settings)
        missed = collapsed(schedule, anchor, last, previous, policy, left)
        return _fire(previous, previous_due, window, pending_due, now, settings, policy, missed)
    if last is not None and fire <= last:
        return not_due()
    following_due = None if following is None else due(following, next_of(following))
    window = _close(fire_due, following_due, policy, settings)
    inside = following is not None and (policy.not_after is None or following <= policy.not_after)
    missed = collapsed(schedule, anchor, last, fire, policy, left)
    return _fire(fire, fire_due, window, following_due if inside else None, now, settings, policy, missed)
