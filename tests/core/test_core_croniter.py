"""Cross-check against croniter, the reference, where croniter and our policy agree.

croniter is only asked about canonical expressions (explicit values, '*' only where written) whose
day fields are '*' or star-free (so POSIX and Vixie day rules coincide), in UTC, and in DST zones
only when the whole stretch between the probe and the answer has one UTC offset.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alma_schedule.core import Cron, latest_fire, next_fire

FAR = datetime(1990, 1, 1, tzinfo=UTC)
ZONES = ["Europe/London", "America/New_York", "Australia/Lord_Howe", "Pacific/Chatham", "Asia/Kolkata"]


def _values(lo: int, hi: int, max_size: int = 4) -> st.SearchStrategy[str]:
    vals = st.lists(st.integers(lo, hi), min_size=1, max_size=max_size, unique=True)
    return st.one_of(st.just("*"), vals.map(lambda v: ",".join(map(str, sorted(v)))))


CANONICAL = st.tuples(_values(0, 59, 6), _values(0, 23, 6), _values(1, 31), _values(1, 12, 6), _values(0, 6)).map(
    " ".join
)


def _reference(expr: str, tz: str, t: datetime) -> tuple[datetime, datetime]:
    zone = ZoneInfo(tz)
    nxt = croniter(expr, t.astimezone(zone)).get_next(datetime)
    start = (t.replace(second=0, microsecond=0) + timedelta(minutes=1)).astimezone(zone)
    prev = croniter(expr, start).get_prev(datetime)
    return nxt.astimezone(UTC), prev.astimezone(UTC)


def _one_offset(tz: str, a: datetime, b: datetime) -> bool:
    zone = ZoneInfo(tz)
    offsets = set()
    t = min(a, b) - timedelta(hours=3)
    while t <= max(a, b) + timedelta(hours=3):
        offsets.add(t.astimezone(zone).utcoffset())
        t += timedelta(hours=1)
    return len(offsets) == 1


@settings(max_examples=500, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(CANONICAL, st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2040, 1, 1), timezones=st.just(UTC)))
def test_utc_matches_croniter(expr: str, t: datetime) -> None:
    want_next, want_prev = _reference(expr, "UTC", t)
    assert next_fire(Cron(expr), FAR, t) == want_next
    assert latest_fire(Cron(expr), FAR, t) == want_prev


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(
    st.tuples(
        _values(0, 59, 6),
        st.one_of(st.just("*"), _values(0, 23, 8)),
        st.just("*"),
        st.just("*"),
        st.one_of(st.just("*"), _values(0, 6)),
    ).map(" ".join),
    st.sampled_from(ZONES),
    st.sampled_from(
        [
            datetime(2026, 1, 10, tzinfo=UTC),
            datetime(2026, 7, 10, tzinfo=UTC),
            datetime(2027, 12, 1, tzinfo=UTC),
            datetime(2029, 6, 20, tzinfo=UTC),
        ]
    ),
    st.integers(0, 20 * 24 * 60),
)
def test_zones_outside_transitions_match_croniter(expr: str, tz: str, base: datetime, minutes: int) -> None:
    t = base + timedelta(minutes=minutes, seconds=minutes % 61)
    want_next, want_prev = _reference(expr, tz, t)
    cron = Cron(expr, tz)
    if _one_offset(tz, t, want_next):
        assert next_fire(cron, FAR, t) == want_next
    if _one_offset(tz, want_prev, t):
        assert latest_fire(cron, FAR, t) == want_prev
