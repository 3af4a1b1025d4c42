"""The fires of a cron on a business calendar: the nominal fires rolled by :func:`.calendar.roll_fire`,
the skipped ones left out, as the instants the tick claims (``cal_next``, ``cal_latest``) and, for
``schedule next`` and ``routines describe``, each nominal fire with what the calendar did to it.

docs/architecture.md, section "The modules, in detail" (core/calendar_fires.py).
"""

from __future__ import annotations

from functools import lru_cache

from alma_schedule.core.calendar import BusinessDays, Rolled, day_start, local_day, roll_fire, run_bounds
from alma_schedule.core.cron_fires import cron_latest, cron_next
from alma_schedule.core.types import compile_cron

__all__ = ["cal_latest", "cal_next", "collided_between", "rolled_after"]

#: Nominal fires looked at for one answer at most (a schedule whose every fire is skipped ends here).
SCAN_LIMIT = 20_000
#: The ``skipped(calendar)`` rows one claim writes at most (the newest kept): a week of a minutely cron.
COLLIDED_LIMIT = 10_080


def _nominal_next(expr: str, tz: str | None, a: int) -> int | None:
    return cron_next(expr, tz, a)


def _nominal_latest(expr: str, tz: str | None, n: int) -> int | None:
    return cron_latest(expr, tz, n)


@lru_cache(maxsize=8192)
def cal_next(expr: str, tz: str | None, days: BusinessDays, roll: str, a: int) -> int | None:
    """The first instant a fire of cron ``expr`` in ``tz`` runs on ``days`` under ``roll``, strictly
    after epoch second ``a`` (None: none within the scan). Pure; cached by everything it reads."""
    spec, zone = compile_cron(expr, tz)
    lo = a
    if roll == "following":  # a fire of the closed days before a's day may roll to after a
        start, _ = run_bounds(days, local_day(zone, a)[0])
        lo = min(a, day_start(zone, start) - 1)
    f = _nominal_next(expr, tz, lo)
    for _ in range(SCAN_LIMIT):
        if f is None:
            return None
        r = roll_fire(spec, zone, days, roll, f)
        if r.instant is not None and r.instant > a:
            return r.instant
        if r.instant is None and not r.collided:  # a skipped closed day: its every fire is skipped
            f = _nominal_next(expr, tz, day_start(zone, local_day(zone, f)[0] + 1) - 1)
        else:
            f = _nominal_next(expr, tz, f)
    return None


@lru_cache(maxsize=8192)
def cal_latest(expr: str, tz: str | None, days: BusinessDays, roll: str, n: int) -> int | None:
    """The last instant a fire runs on ``days`` under ``roll`` at or before epoch second ``n``."""
    spec, zone = compile_cron(expr, tz)
    hi = n
    if roll == "preceding":  # a fire of the closed days after n's day may roll to before n
        _, end = run_bounds(days, local_day(zone, n)[0])
        hi = max(n, day_start(zone, end + 1) - 1)
    f = _nominal_latest(expr, tz, hi)
    for _ in range(SCAN_LIMIT):
        if f is None:
            return None
        r = roll_fire(spec, zone, days, roll, f)
        if r.instant is not None and r.instant <= n:
            return r.instant
        if r.instant is None and not r.collided:
            f = _nominal_latest(expr, tz, day_start(zone, local_day(zone, f)[0]) - 1)
        else:
            f = _nominal_latest(expr, tz, f - 1)
    return None


@lru_cache(maxsize=8192)
def collided_between(expr: str, tz: str | None, days: BusinessDays, roll: str, lo: int, hi: int) -> tuple[int, ...]:
    """The nominal fires ``f`` with ``lo < f <= hi`` that do not run because they rolled onto a day
    where another fire of the routine runs (``Rolled.collided``), oldest first, the newest
    :data:`COLLIDED_LIMIT` at most. The claim of the fire at ``hi`` (its cursor at ``lo``) records
    each as ``skipped(calendar)``: consecutive claims' windows ``(lo, hi]`` partition the timeline, so
    each such fire gets its row once. ``skip`` never collides (its closed-day fires are no fires)."""
    if roll == "skip" or hi <= lo:
        return ()
    spec, zone = compile_cron(expr, tz)
    out: list[int] = []
    f = _nominal_next(expr, tz, lo)
    for _ in range(SCAN_LIMIT):
        if f is None or f > hi:
            break
        if roll_fire(spec, zone, days, roll, f).collided:
            out.append(f)
        f = _nominal_next(expr, tz, f)
    return tuple(out[-COLLIDED_LIMIT:])


def rolled_after(expr: str, tz: str | None, days: BusinessDays, roll: str, a: int, n: int) -> list[Rolled]:
    """The next ``n`` nominal fires after epoch second ``a``, each as :class:`Rolled` (what the
    calendar did to it): for the previews, which show the moved and the skipped ones."""
    spec, zone = compile_cron(expr, tz)
    out: list[Rolled] = []
    f = _nominal_next(expr, tz, a)
    while f is not None and len(out) < n:
        out.append(roll_fire(spec, zone, days, roll, f))
        f = _nominal_next(expr, tz, f)
    return out


def _day_text(zone: str, u: int) -> str:
    from datetime import date

    from alma_schedule.core.calendar import local_day

    return date.fromordinal(local_day(zone, u)[0]).strftime("%a %Y-%m-%d")


def calendar_notes(expr: str, tz: str | None, days: BusinessDays, roll: str, after: int, fires: list[int]) -> list[str]:
    """For each of ``fires`` (the instants a preview shows, in order, all after epoch second
    ``after``), what the calendar did on its way: ``rolled from Sat 2027-07-31 (weekend)`` and the
    nominal fires skipped since the previous one, ``skipped Mon 2027-07-05 (Independence Day)``."""
    zone = compile_cron(expr, tz)[1]
    notes: list[list[str]] = [[] for _ in fires]
    index = {u: i for i, u in enumerate(fires)}
    pending: list[str] = []
    f = _nominal_next(expr, tz, after)
    spec = compile_cron(expr, tz)[0]
    for _ in range(SCAN_LIMIT):
        if f is None or not fires or f > fires[-1] + 40 * 86400:
            break
        r = roll_fire(spec, zone, days, roll, f)
        if r.instant is None:
            why = f"{r.why}; another fire runs that day" if r.collided else r.why
            pending.append(f"skipped {_day_text(zone, f)} ({why})")
        elif r.instant in index:
            i = index[r.instant]
            notes[i] = pending + notes[i]
            pending = []
            if r.moved:
                notes[i].append(f"rolled from {_day_text(zone, f)} ({r.why})")
            if i == len(fires) - 1:
                break
        f = _nominal_next(expr, tz, f)
    return ["; ".join(n) for n in notes]


@lru_cache(maxsize=8192)
def cal_nominal(expr: str, tz: str | None, days: BusinessDays, roll: str, u: int) -> int:
    """The nominal fire that runs at instant ``u`` (a fire of :func:`cal_next`): ``u`` itself, or
    the fire of the adjacent run of closed days that rolled onto it. The run id is read from it."""
    spec, zone = compile_cron(expr, tz)
    if roll == "skip" or _nominal_latest(expr, tz, u) == u:
        return u
    d = local_day(zone, u)[0]
    first, last = (run_bounds(days, d - 1)[0], d - 1) if roll == "following" else (d + 1, run_bounds(days, d + 1)[1])
    f = _nominal_next(expr, tz, day_start(zone, first) - 1)
    for _ in range(SCAN_LIMIT):
        if f is None or local_day(zone, f)[0] > last:
            break
        if roll_fire(spec, zone, days, roll, f).instant == u:
            return f
        f = _nominal_next(expr, tz, f)
    return u
