"""The tick's ``decide`` (cached fires, one shared answer per schedule, anchor, cursor and now) gives
exactly the Decision of the straightforward computation (:mod:`decide_reference`), value and repr,
the fires a claim collapses (``Fire.fires_missed``, walked one by one there) included.

Fleets of routines share a schedule object and differ in anchor, cursor, key and claim count, so
one routine's cached answers are read back for the others; every routine is decided twice (cold,
then from the caches). Schedules: crons in zones with DST (instants drawn around the zones' own
transitions), ``every``, ``at``; policies: jitter, catch_up, bounds, max_runs, overlap; settings
with and without ``max_catch_up``; instants in UTC, at another offset, naive, or of a subclass.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from decide_reference import latest_fire as reference_latest
from decide_reference import reference_decide
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alma_schedule.core import parse_schedule
from alma_schedule.core.zones import _year_table
from alma_schedule.engine import decide
from alma_schedule.model import Routine
from alma_schedule.settings import Settings

ZONES = [
    None,
    "UTC",
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
    "Asia/Kolkata",
    "America/Santiago",
    "Europe/Berlin",
]
CRONS = [
    "*/15 * * * *",
    "0 * * * *",
    "30 2 * * *",
    "30 1 * * *",
    "0 12 * * *",
    "0 9 * * mon-fri",
    "0 0 29 2 *",
    "0 2,3 * * *",
    "*/20 2 * * *",
    "45 1 1,15 * *",
    "59 23 31 12 *",
    "@weekly",
    "* * * * *",
]
EVERY: list[Any] = ["1s", "59s", "15m", "1h", "90m", "1d", 86401, "7d"]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
TRANSITIONS = sorted(
    {b for z in ZONES[2:] for y in (2026, 2027) for b in _year_table(z, y)[0]}  # DST changes and 1 January
)
SETTINGS = [
    Settings(clock=lambda: EPOCH),
    Settings(clock=lambda: EPOCH, max_catch_up=timedelta(minutes=5), one_shot_window=timedelta(minutes=10)),
    Settings(clock=lambda: EPOCH, resend_first=timedelta(seconds=7), one_shot_window=timedelta(days=2)),
]


class Instant(datetime):
    """A datetime subclass (its arithmetic keeps the class): never a cache key of the fast path."""


@st.composite
def instants(draw: st.DrawFn) -> datetime:
    if draw(st.booleans()):
        u = draw(st.sampled_from(TRANSITIONS)) + draw(st.integers(-2 * 86400, 2 * 86400))
    else:
        u = draw(st.integers(1_735_689_600, 1_830_297_600))  # 2025 .. 2028
    t = EPOCH + timedelta(seconds=u)
    if draw(st.sampled_from([False] * 5 + [True])):
        t += timedelta(microseconds=draw(st.integers(1, 999_999)))
    return t


def dressed(draw: st.DrawFn, t: datetime) -> datetime:
    """``t`` as a plain UTC datetime mostly; sometimes at another offset, naive, or a subclass."""
    kind = draw(st.sampled_from(["utc"] * 12 + ["offset", "naive", "subclass"]))
    if kind == "offset":
        return t.astimezone(timezone(timedelta(hours=2)))
    if kind == "naive":
        return t.replace(tzinfo=None)
    if kind == "subclass":
        return Instant.fromtimestamp(t.timestamp(), UTC)
    return t


@st.composite
def schedules(draw: st.DrawFn, now: datetime) -> dict[str, Any]:
    kind = draw(st.sampled_from(["cron", "cron", "cron", "every", "at"]))
    obj: dict[str, Any]
    if kind == "cron":
        obj = {"cron": draw(st.sampled_from(CRONS))}
        tz = draw(st.sampled_from(ZONES))
        if tz is not None:
            obj["tz"] = tz
    elif kind == "every":
        obj = {"every": draw(st.sampled_from(EVERY))}
    else:
        obj = {"at": (now + timedelta(seconds=draw(st.integers(-3 * 86400, 86400)))).replace(microsecond=0).isoformat()}
    if draw(st.booleans()):
        return obj  # half the schedules have no policy
    if draw(st.booleans()):
        obj["catch_up"] = draw(st.sampled_from(["30s", "10m", "2h", "3d"]))
    if draw(st.sampled_from([False, False, True])):
        obj["jitter"] = draw(st.sampled_from(["1s", "20s", "5m", "2h"]))
    if draw(st.booleans()):
        obj["overlap"] = draw(st.sampled_from(["skip", "latest"]))
    if draw(st.booleans()):
        obj["max_runs"] = draw(st.sampled_from([1, 3, 1000]))
    if draw(st.booleans()):
        lo = near(draw, now, 5 * 86400, 86400) + timedelta(microseconds=draw(st.sampled_from([0, 1, 500_000])))
        if draw(st.booleans()):
            obj["not_before"] = lo.astimezone(timezone(timedelta(hours=-3))).isoformat()
        if draw(st.booleans()):
            obj["not_after"] = near(draw, lo, 0, 5 * 86400).isoformat()
    return obj


def near(draw: st.DrawFn, now: datetime, back: int, ahead: int) -> datetime:
    """An instant within [now - back, now + ahead] seconds, on every scale (not only near ``now``)."""
    unit = draw(st.sampled_from([1, 60, 900, 3600, 86400]))
    seconds = draw(st.integers(-back // unit, ahead // unit)) * unit + draw(st.integers(-2, 2))
    return now + timedelta(seconds=max(-back, min(ahead, seconds)))


def cursor(draw: st.DrawFn, now: datetime, schedule: dict[str, Any], anchor: datetime) -> datetime | None:
    """A routine's ``last_fire``: none, a fire of its own (the latest or one before, the usual
    cursor), or any instant around ``now`` (a restart, a cursor ahead of ``now``)."""
    kind = draw(st.sampled_from(["none", "latest", "earlier", "any"]))
    if kind == "none":
        return None
    if kind == "any":
        return near(draw, now, 3 * 86400, 600)
    try:
        latest = reference_latest(parse_schedule(schedule), anchor, now)
    except Exception:  # a naive or out-of-range instant: any cursor will do
        latest = None
    if latest is None:
        return near(draw, now, 3 * 86400, 600)
    return latest if kind == "latest" else latest - timedelta(seconds=draw(st.sampled_from([1, 60, 3600, 86400])))


@st.composite
def fleets(draw: st.DrawFn) -> tuple[list[Routine], datetime, Settings]:
    now = draw(instants())
    schedule = draw(schedules(now))
    shared_anchor = near(draw, now, 40 * 86400, 3600)
    shared_last = cursor(draw, now, schedule, shared_anchor)
    routines = []
    for i in range(draw(st.integers(1, 4))):
        anchor = shared_anchor if draw(st.booleans()) else near(draw, now, 40 * 86400, 3600)
        if draw(st.sampled_from([False] * 5 + [True])):
            anchor += timedelta(microseconds=draw(st.integers(1, 999_999)))
        last = shared_last if draw(st.booleans()) else cursor(draw, now, schedule, anchor)
        routines.append(
            Routine(
                draw(st.sampled_from(["acme", "globex"])),
                draw(st.sampled_from(["alice", "bob"])),
                f"r{i}",
                "script",
                schedule,
                {},
                registered_at=dressed(draw, anchor),
                config_revision="rev",
                last_fire=None if last is None else dressed(draw, last),
                schedule_starts=draw(st.sampled_from([0, 0, 2, 999])),  # max_runs counts starts
                paused_reason=draw(st.sampled_from([None] * 20 + ["paused"])),
            )
        )
    return routines, dressed(draw, now), draw(st.sampled_from(SETTINGS))


def outcome(fn: Any, routine: Routine, now: datetime, s: Settings) -> tuple[Any, ...]:
    """What ``fn`` answers, compared by value and repr (which shows each instant's class and zone)."""
    try:
        d = fn(routine, now, s)
    except Exception as exc:  # a bad instant or row: the same error either way
        return ("raised", type(exc), str(exc))
    return ("answered", d, repr(d))


Fleet = tuple[list[Routine], datetime, Settings]


@settings(max_examples=1500, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(fleets())
def test_the_fast_decide_answers_exactly_like_the_straightforward_one(fleet: Fleet) -> None:
    routines, now, s = fleet
    expected = [outcome(reference_decide, r, now, s) for r in routines]
    for _ in range(2):  # cold, then every answer from the caches the fleet filled
        assert [outcome(decide, r, now, s) for r in routines] == expected


def test_the_equivalence_covers_fires_misses_and_not_due() -> None:
    """The draws above reach each kind of answer (so the equivalence is not only over NotDue)."""
    seen: set[str] = set()

    @settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(fleets())
    def observe(fleet: Fleet) -> None:
        routines, now, s = fleet
        for r in routines:
            kind, d, _ = outcome(decide, r, now, s)
            if kind == "raised":
                seen.add("raised")
            elif type(d).__name__ == "Fire":
                seen.add("missed" if d.missed else "jittered fire" if d.due_at != d.fire_at else "fire")
            else:
                seen.add("not due" if d.next_due_at is not None else "exhausted")

    observe()
    assert seen >= {"raised", "fire", "missed", "jittered fire", "not due", "exhausted"}


def test_the_equivalence_covers_collapsed_fires_up_to_the_cap() -> None:
    """Issue 44: the draws above reach claims that collapse fires, some up to the 10,000 cap."""
    counts: set[str] = set()

    @settings(max_examples=1500, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(fleets())
    def observe(fleet: Fleet) -> None:
        routines, now, s = fleet
        for r in routines:
            kind, d, _ = outcome(decide, r, now, s)
            if kind == "answered" and type(d).__name__ == "Fire" and d.fires_missed:
                counts.add("capped" if d.fires_missed == 10_000 else "collapsed")

    observe()
    assert counts == {"collapsed", "capped"}
