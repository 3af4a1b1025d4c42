"""``beat_schedule`` entries -> ``task`` routines, or a refusal with the reason. Pure: no I/O.

docs/architecture.md, section "The modules, in detail" (beat/convert.py).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from alma_schedule.compat.celery import crontab_as_written
from alma_schedule.core.cron import compile_expr
from alma_schedule.core.types import Cron, Every, Solar
from alma_schedule.core.zones import check_zone
from alma_schedule.errors import InvalidInput, InvalidSchedule
from alma_schedule.model import RoutineSpec, Scope, check_id
from alma_schedule.runners.task import KIND, TaskDefinition

ENTRY_KEYS = ("task", "schedule", "args", "kwargs", "options", "relative")

ANCHOR_NOTE = (
    "beat counts this interval from the entry's last run (the first run one interval after beat "
    "starts); alma-schedule fires at registration + k x interval, whatever a run's duration or a restart"
)

SOLAR_NOTE = (
    "fires at the event's UTC instant on each day it occurs, within 60 s of Celery's own solar (ephem); "
    "a day without the event (polar day or night) has no fire, as in Celery"
)

AND_OR_MARK = "are both restricted: Celery's crontab runs only on days matching BOTH"
AND_OR_REASON = (
    "day_of_month {dom!r} and day_of_week {dow!r} are both restricted: Celery's crontab runs only on "
    "days matching BOTH (AND), while cron runs on days matching EITHER (OR); no 5-field cron means "
    "the same. Rewrite it (e.g. two routines, or restrict only one field and check the other in the task)"
)

# (celery attribute, label, lowest, highest, CronSpec attribute); cron field order.
_FIELDS: tuple[tuple[str, str, int, int, str], ...] = (
    ("minute", "minute", 0, 59, "minutes"),
    ("hour", "hour", 0, 23, "hours"),
    ("day_of_month", "day_of_month", 1, 31, "doms"),
    ("month_of_year", "month_of_year", 1, 12, "months"),
    ("day_of_week", "day_of_week", 0, 6, "dows"),
)


@dataclass(frozen=True, slots=True)
class AppZone:
    """The zone a crontab of the app is read in: ``zone`` (IANA) and where it came from, or why unknown."""

    zone: str | None
    source: str
    problem: str | None = None


def app_zone(timezone: object, enable_utc: bool, local_zone: str | None) -> AppZone:
    """Celery's rule (``Celery.timezone``): the ``timezone`` setting; else UTC when ``enable_utc``;
    else the system local zone, given here as ``local_zone`` (None = could not be determined)."""
    if timezone:
        key = timezone if isinstance(timezone, str) else getattr(timezone, "key", None)
        if not isinstance(key, str):
            return AppZone(None, "timezone setting", f"the app's timezone {timezone!r} has no IANA name")
        try:
            return AppZone(check_zone(key), "timezone setting")
        except InvalidSchedule as exc:
            return AppZone(None, "timezone setting", f"the app's timezone: {exc}")
    if enable_utc:
        return AppZone("UTC", "enable_utc=True, no timezone")
    source = "system local zone (enable_utc=False, no timezone)"
    if not local_zone:
        return AppZone(
            None,
            source,
            "enable_utc=False and no timezone: Celery reads crontabs in the system's local time, "
            "whose IANA zone could not be determined; set the app's timezone",
        )
    try:
        return AppZone(check_zone(local_zone), source)
    except InvalidSchedule as exc:
        return AppZone(None, source, f"the system local zone: {exc}")


@dataclass(frozen=True, slots=True)
class Conversion:
    """One beat entry: the routine it becomes (``spec``), or why not (``refused``), plus notes."""

    name: str
    task: str | None
    beat: str
    spec: RoutineSpec | None = None
    refused: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.spec is not None

    @property
    def converted_as(self) -> str:
        """A short human description of the schedule it became (or ``refused``)."""
        if self.spec is None:
            return "refused"
        s = self.spec.schedule
        if "cron" in s:
            return f"cron {s['cron']!r} in {s.get('tz') or 'UTC'}"
        if "solar" in s:
            return f"solar {s['solar']} at {s['lat']}, {s['lon']}"
        return f"every {s['every']}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "task": self.task,
            "beat": self.beat,
            "converted": self.converted_as if self.spec is not None else None,
            "schedule": dict(self.spec.schedule) if self.spec is not None else None,
            "definition": dict(self.spec.definition) if self.spec is not None else None,
            "refused": self.refused,
            "notes": list(self.notes),
        }


class _Refuse(Exception):
    pass


def describe_beat(schedule: object) -> str:
    """How beat shows a schedule value (short; a default ``repr`` becomes ``<module.Class>``)."""
    text = repr(schedule)
    if " object at 0x" in text:
        text = f"<{type(schedule).__module__}.{type(schedule).__qualname__}>"
    return text if len(text) <= 80 else text[:77] + "..."


# ---------------------------------------------------------------------- schedules


def _field_text(
    label: str, orig: object, values: Collection[int], lo: int, hi: int, attr: str
) -> tuple[str, str | None]:
    """The cron text of one field (same set as Celery's), and a note when the user's text was rewritten."""
    got = frozenset(int(v) for v in values)
    if got == frozenset(range(lo, hi + 1)):
        if isinstance(orig, str) and orig.strip() == "*":
            return "*", None
        return "*", f"{label} {orig!r} covers every value: written '*'"
    if isinstance(orig, int) and not isinstance(orig, bool) and got == {orig}:
        return str(orig), None
    if isinstance(orig, str):
        text = orig.strip()
        if text and not any(c.isspace() for c in text):
            probe = ["*"] * 5
            probe[[f[0] for f in _FIELDS].index(label)] = text
            try:
                spec = compile_expr(" ".join(probe))
                mine = frozenset(getattr(spec, attr))
            except InvalidSchedule:
                mine = frozenset()
            if mine == got:
                if label in ("day_of_month", "day_of_week") and text.startswith("*"):
                    pass  # a '*'-led day field changes cron's day rule: write it plainly
                else:
                    return text, None
    plain = _compact(sorted(got))
    return plain, f"{label} {orig!r} written as {plain!r} (same values)"


def _compact(values: list[int]) -> str:
    parts: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        if j - i >= 2:
            parts.append(f"{values[i]}-{values[j]}")
        else:
            parts.extend(str(v) for v in values[i : j + 1])
        i = j + 1
    return ",".join(parts)


def _crontab(value: Any, zone: AppZone) -> tuple[dict[str, Any], list[str]]:
    if getattr(value, "nowfun", None) is not None:
        raise _Refuse("the crontab has a custom nowfun: the clock it reads cannot be converted")
    texts: list[str] = []
    notes: list[str] = []
    for attr, label, lo, hi, spec_attr in _FIELDS:
        text, note = _field_text(label, crontab_as_written(value, attr), getattr(value, attr), lo, hi, spec_attr)
        texts.append(text)
        if note:
            notes.append(note)
    dom, dow = texts[2], texts[4]
    if dom != "*" and dow != "*":
        dom_written, dow_written = crontab_as_written(value, "day_of_month"), crontab_as_written(value, "day_of_week")
        raise _Refuse(AND_OR_REASON.format(dom=dom_written, dow=dow_written))
    if zone.zone is None:
        raise _Refuse(zone.problem or "the app's time zone is unknown")
    expr = " ".join(texts)
    try:
        cron = Cron(expr, zone.zone)
    except InvalidSchedule as exc:
        raise _Refuse(f"cron {expr!r}: {exc}") from None
    notes.append(f"read in {zone.zone} ({zone.source})")
    return {"cron": cron.expr, "tz": zone.zone}, notes


def _interval(seconds: float, what: str) -> tuple[dict[str, Any], list[str]]:
    if not math.isfinite(seconds):
        raise _Refuse(f"{what} is not a finite number of seconds")
    if seconds < 1:
        raise _Refuse(f"{what} is shorter than one second (intervals are whole seconds, at least 1 s)")
    if not float(seconds).is_integer():
        raise _Refuse(
            f"{what} is a fractional number of seconds ({seconds:g} s); intervals are whole seconds: "
            "round it in the beat_schedule first if that is what you mean"
        )
    try:
        every = Every(timedelta(seconds=int(seconds)))
    except InvalidSchedule as exc:
        raise _Refuse(f"{what}: {exc}") from None
    return every.to_json(), [ANCHOR_NOTE]


def _solar(value: Any) -> tuple[dict[str, Any], list[str]]:
    if value.nowfun is not None:
        raise _Refuse("the solar schedule has a custom nowfun: the clock it reads cannot be converted")
    try:
        sun = Solar(value.event, value.lat, value.lon)
    except InvalidSchedule as exc:
        raise _Refuse(f"solar({value.event!r}, {value.lat!r}, {value.lon!r}): {exc}") from None
    return sun.to_json(), [SOLAR_NOTE]


def convert_schedule(value: object, zone: AppZone, *, relative: bool = False) -> tuple[dict[str, Any], list[str]]:
    """A beat schedule value -> (our schedule JSON, notes); raises ``_Refuse`` with the reason."""
    from celery.schedules import crontab, schedule, solar

    if relative:
        raise _Refuse(
            "relative=True rounds each run to the interval's resolution (beat's 'relative' flag); "
            "express it as a cron instead"
        )
    if isinstance(value, bool) or value is None:
        raise _Refuse(f"schedule {value!r} is not a schedule")
    if isinstance(value, (int, float)):
        return _interval(float(value), f"{value!r} seconds")
    if isinstance(value, timedelta):
        return _interval(value.total_seconds(), f"timedelta {value}")
    if type(value) is crontab:
        return _crontab(value, zone)
    if type(value) is schedule:
        every: Any = value
        if every.nowfun is not None:
            raise _Refuse("the schedule has a custom nowfun: the clock it reads cannot be converted")
        if every.relative:
            return convert_schedule(every.run_every, zone, relative=True)
        return _interval(every.run_every.total_seconds(), f"schedule(run_every={every.run_every})")
    if type(value) is solar:
        return _solar(value)
    raise _Refuse(
        f"custom schedule class {type(value).__module__}.{type(value).__qualname__}: its meaning lives "
        "in its own code (is_due), so it cannot be converted"
    )


# ---------------------------------------------------------------------- entries


def convert_entry(
    name: str,
    entry: Mapping[str, Any],
    scope: Scope,
    zone: AppZone,
    *,
    known_tasks: Collection[str] | None = None,
    track: bool = False,
    deadline: str | None = None,
) -> Conversion:
    """Convert one beat entry (its name and its dict). Never raises for a bad entry: refuses it.

    ``track`` (with ``deadline``, e.g. ``"1h"``) makes the routine a tracked one: its run follows
    the fleet task's result until the deadline instead of ending ``completed(sent)``.
    """
    task = entry.get("task") if isinstance(entry, Mapping) else None
    task_name = task if isinstance(task, str) else None
    beat = describe_beat(entry.get("schedule")) if isinstance(entry, Mapping) else "?"
    notes: list[str] = []
    try:
        if not isinstance(entry, Mapping):
            raise _Refuse(f"the entry is a {type(entry).__name__}, not a dict")
        try:
            check_id("routine id (the beat entry name)", name)
        except InvalidInput as exc:
            raise _Refuse(str(exc)) from None
        unknown = sorted(str(k) for k in entry if k not in ENTRY_KEYS)
        if unknown:
            raise _Refuse(f"entry key {unknown[0]!r} is not a beat_schedule key ({', '.join(ENTRY_KEYS)})")
        if task_name is None or not task_name.strip():
            raise _Refuse("the entry has no 'task' name")
        if known_tasks is not None and task_name not in known_tasks:
            raise _Refuse(f"task {task_name!r} is not registered in the app (after importing its modules)")
        if "schedule" not in entry:
            raise _Refuse("the entry has no 'schedule'")
        sched, notes = convert_schedule(entry["schedule"], zone, relative=bool(entry.get("relative", False)))
        raw_options = entry.get("options") or {}
        definition: dict[str, Any] = {"task": task_name}
        args = entry.get("args") or []
        if isinstance(args, (list, tuple)):
            args = list(args)
        kwargs = entry.get("kwargs") or {}
        if args:
            definition["args"] = args
        if kwargs:
            definition["kwargs"] = kwargs
        if raw_options:
            definition["options"] = raw_options
        if track:
            definition["track"] = True
            definition["deadline"] = deadline
        try:
            parsed = TaskDefinition.parse(definition)
        except InvalidInput as exc:
            raise _Refuse(str(exc)) from None
        spec = RoutineSpec(scope.org, scope.uid, name, KIND, sched, parsed.to_json())
        return Conversion(name, task_name, beat, spec, None, tuple(notes))
    except _Refuse as exc:
        return Conversion(name, task_name, beat, None, str(exc))


def convert_beat_schedule(
    beat_schedule: Mapping[str, Any] | None,
    scope: Scope,
    zone: AppZone,
    *,
    known_tasks: Collection[str] | None = None,
    track: bool = False,
    deadline: str | None = None,
) -> list[Conversion]:
    """Every entry of a ``beat_schedule``, in its order: converted or refused (never raises per entry).

    A ``deadline`` without ``track``, or ``track`` without a valid ``deadline``, is
    :class:`InvalidInput` (it would refuse every entry alike).
    """
    if track or deadline is not None:
        TaskDefinition.parse({"task": "beat.entry", "track": track, "deadline": deadline})
    out: list[Conversion] = []
    for name, entry in _items(beat_schedule):
        out.append(convert_entry(name, entry, scope, zone, known_tasks=known_tasks, track=track, deadline=deadline))
    return out


def _items(beat_schedule: Mapping[str, Any] | None) -> Iterable[tuple[str, Any]]:
    if not beat_schedule:
        return []
    return [(str(k), v) for k, v in beat_schedule.items()]
