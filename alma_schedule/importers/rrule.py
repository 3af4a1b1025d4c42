"""RedBeat's ``rrule`` schedule (dateutil's recurrence rule, as RedBeat stores it in JSON) -> a cron
where the rule is one, else :class:`~alma_schedule.importers.common.Refuse` with the reason. Pure.

docs/architecture.md, section "The modules, in detail" (importers/rrule.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from alma_schedule.importers.common import Refuse

__all__ = ["rrule_to_cron"]

YEARLY, MONTHLY, WEEKLY, DAILY, HOURLY, MINUTELY = range(6)
UNSUPPORTED = ("count", "until", "bysetpos", "byyearday", "byeaster", "byweekno")


def _values(raw: Any, what: str) -> list[int] | None:
    if raw is None:
        return None
    items = raw if isinstance(raw, (list, tuple)) else [raw]
    out: list[int] = []
    for item in items:
        if isinstance(item, Mapping) and "wkday" in item:  # RedBeat's weekday (its +n/-n is not stored)
            item = item["wkday"]
        if isinstance(item, bool) or not isinstance(item, int):
            raise Refuse(f"rrule {what} {raw!r} is not a list of whole numbers")
        out.append(item)
    return sorted(set(out))


def _field(values: list[int] | None, lo: int, hi: int, what: str) -> str:
    if values is None or set(values) == set(range(lo, hi + 1)):
        return "*"
    bad = [v for v in values if v < lo or v > hi]
    if bad:
        raise Refuse(f"rrule {what} {bad[0]} has no cron equivalent (cron's range is {lo}-{hi})")
    return ",".join(str(v) for v in values)


def dtstart_of(rule: Mapping[str, Any]) -> datetime:
    """The rule's ``dtstart`` (RedBeat: epoch seconds and the UTC offset in minutes) as an aware datetime."""
    raw, minutes = rule.get("dtstart"), rule.get("dtstart_tz") or 0
    if not isinstance(raw, (int, float)) or not isinstance(minutes, (int, float)):
        raise Refuse("the rrule has no dtstart (epoch seconds)")
    return datetime.fromtimestamp(raw, tz=timezone(timedelta(minutes=minutes)) if minutes else UTC)


def zone_of(start: datetime) -> str:
    """The IANA zone of ``start``'s fixed offset: UTC, or ``Etc/GMT-h`` for a whole number of hours."""
    offset = start.utcoffset() or timedelta(0)
    hours, rest = divmod(int(offset.total_seconds()), 3600)
    if rest:
        raise Refuse(f"the rrule's UTC offset {offset} is not a whole number of hours: no zone keeps it")
    return "UTC" if hours == 0 else f"Etc/GMT{-hours:+d}"


def rrule_to_cron(rule: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``{"cron": ..., "tz": ..., "not_before": dtstart}`` for a rule every minute, hour, day, week,
    month or year (interval 1, whole minutes); dateutil's defaults from ``dtstart`` applied."""
    freq = rule.get("freq")
    if not isinstance(freq, int) or freq not in range(6):
        raise Refuse(f"rrule freq {freq!r}: only minutely to yearly rules are crons (secondly is not)")
    if rule.get("interval", 1) != 1:
        raise Refuse(f"rrule interval {rule.get('interval')!r}: a cron repeats every unit, not every n-th")
    for key in UNSUPPORTED:
        if rule.get(key) not in (None, [], ()):
            raise Refuse(f"rrule {key} {rule.get(key)!r} has no cron equivalent")
    start = dtstart_of(rule)
    seconds = _values(rule.get("bysecond"), "bysecond")
    if (seconds if seconds is not None else [start.second]) != [0]:
        raise Refuse("the rrule fires at a second other than :00 (bysecond or dtstart's): crons fire on minutes")
    minutes = _values(rule.get("byminute"), "byminute")
    hours = _values(rule.get("byhour"), "byhour")
    doms = _values(rule.get("bymonthday"), "bymonthday")
    dows = _values(rule.get("byweekday"), "byweekday")
    months = _values(rule.get("bymonth"), "bymonth")
    minutes = minutes if minutes is not None or freq == MINUTELY else [start.minute]
    hours = hours if hours is not None or freq >= HOURLY else [start.hour]
    if doms is None and dows is None:  # dateutil's defaults (no byweekno/byyearday: refused above)
        if freq == YEARLY:
            months, doms = months or [start.month], [start.day]
        elif freq == MONTHLY:
            doms = [start.day]
        elif freq == WEEKLY:
            dows = [start.weekday()]
    dom = _field(doms, 1, 31, "bymonthday")
    dow = _field(None if dows is None else sorted((d + 1) % 7 for d in dows), 0, 6, "byweekday")
    if dom != "*" and dow != "*":
        raise Refuse("the rrule restricts both bymonthday and byweekday (days matching BOTH); cron ORs them")
    expr = " ".join(
        [_field(minutes, 0, 59, "byminute"), _field(hours, 0, 23, "byhour"), dom, _field(months, 1, 12, "bymonth"), dow]
    )
    zone = zone_of(start)
    notes = [f"rrule read in its dtstart's offset ({zone})"]
    return {"cron": expr, "tz": zone, "not_before": start.astimezone(UTC).isoformat()}, notes
