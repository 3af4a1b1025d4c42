"""The importers' pure parts: RedBeat's rrule as a cron (dateutil's defaults from dtstart), and the
send options an entry may carry (a queue, never an exchange elsewhere or a header)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from croniter import croniter
from dateutil.rrule import rrule

from alma_schedule.importers.common import Refuse, send_options
from alma_schedule.importers.rrule import rrule_to_cron

START = datetime(2026, 1, 7, 6, 30, tzinfo=UTC)  # a Wednesday


def _stored(freq: int, start: datetime = START, **by: Any) -> dict[str, Any]:
    """A rule as RedBeat's encoder stores it (epoch seconds, the offset in minutes)."""
    offset = start.utcoffset() or timedelta(0)
    return {"freq": freq, "interval": 1, "dtstart": start.timestamp(), "dtstart_tz": offset.total_seconds() / 60, **by}


@pytest.mark.parametrize(
    ("freq", "by", "cron"),
    [
        (5, {}, "* * * * *"),
        (4, {}, "30 * * * *"),
        (3, {}, "30 6 * * *"),
        (3, {"byhour": [8, 20], "byminute": 0}, "0 8,20 * * *"),
        (2, {}, "30 6 * * 3"),
        (2, {"byweekday": [{"__type__": "weekday", "wkday": 0}, 6]}, "30 6 * * 0,1"),
        (1, {}, "30 6 7 * *"),
        (0, {}, "30 6 7 1 *"),
    ],
)
def test_an_rrule_that_is_a_cron_fires_at_the_same_instants(freq: int, by: dict[str, Any], cron: str) -> None:
    out, _ = rrule_to_cron(_stored(freq, **by))
    assert (out["cron"], out["tz"], out["not_before"]) == (cron, "UTC", START.isoformat())
    wk = {k: [d["wkday"] if isinstance(d, dict) else d for d in v] if k == "byweekday" else v for k, v in by.items()}
    mine = list(rrule(freq, dtstart=START, count=6, **wk))
    it = croniter(cron, START - timedelta(seconds=1))
    assert [it.get_next(datetime) for _ in range(6)] == mine


def test_a_fixed_offset_becomes_an_etc_zone() -> None:
    start = datetime(2026, 1, 7, 6, 30, tzinfo=timezone(timedelta(hours=2)))
    out, _ = rrule_to_cron(_stored(3, start))
    assert (out["cron"], out["tz"]) == ("30 6 * * *", "Etc/GMT-2")


@pytest.mark.parametrize(
    ("rule", "why"),
    [
        (_stored(6), "secondly"),
        ({**_stored(5), "interval": 7}, "interval 7"),
        (_stored(3, count=3), "count"),
        (_stored(3, bysetpos=[1]), "bysetpos"),
        (_stored(1, bymonthday=[1], byweekday=[0]), "BOTH"),
        (_stored(1, bymonthday=[-1]), "bymonthday -1"),
        (_stored(3, START.replace(second=5)), "second"),
        (_stored(3, START.astimezone(timezone(timedelta(hours=5, minutes=30)))), "whole number of hours"),
        ({"freq": 3}, "dtstart"),
    ],
)
def test_an_rrule_that_is_no_cron_is_refused_with_the_reason(rule: dict[str, Any], why: str) -> None:
    with pytest.raises(Refuse, match=why):
        rrule_to_cron(rule)


def test_send_options_keep_a_queue_and_refuse_what_a_routine_cannot_send() -> None:
    assert send_options({"queue": "q", "priority": 3}, 60, {}) == {"queue": "q", "priority": 3, "expires": 60}
    assert send_options({"routing_key": "q", "exchange": "q"}, None, {}) == {"queue": "q"}
    with pytest.raises(Refuse, match="routing_key 'other' does not route to the queue 'q'"):
        send_options({"queue": "q", "routing_key": "other"}, None, {})
    with pytest.raises(Refuse, match="exchange 'x'"):
        send_options({"queue": "q", "exchange": "x"}, None, {})
    with pytest.raises(Refuse, match="eta, id are keys of Celery's message protocol"):
        send_options({}, None, {"id": "1", "eta": "now"})
    with pytest.raises(Refuse, match="custom header"):
        send_options({}, None, {"tenant": "a"})
