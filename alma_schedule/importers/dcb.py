"""``import-dcb``: django-celery-beat's periodic tasks, read from its tables with SQLAlchemy Core
(no Django), each converted to a ``task`` routine with its last run as the cursor, or refused.

docs/architecture.md, section "The modules, in detail" (importers/dcb.py).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from alma_schedule.errors import SourceUnavailable, UnknownSourceSchema
from alma_schedule.importers.common import (
    Imported,
    Refuse,
    SourcePlan,
    aware,
    make_spec,
    refuse_past,
    send_options,
    sendable,
    skip_kept,
    task_definition,
)
from alma_schedule.model import Scope
from alma_schedule.model.provenance import IMPORT_DCB

if TYPE_CHECKING:
    from alma_schedule.runners.task import TaskRunner

PREFIX = "django_celery_beat_"
#: The columns read, per table (django-celery-beat 2.x); ``OPTIONAL`` ones read NULL when absent.
COLUMNS: dict[str, tuple[str, ...]] = {
    "periodictask": tuple(
        (
            "id name task interval_id crontab_id solar_id clocked_id args kwargs queue exchange routing_key "
            "headers priority expires expire_seconds one_off start_time enabled last_run_at total_run_count "
            "date_changed"
        ).split()
    ),
    "crontabschedule": ("id", "minute", "hour", "day_of_week", "day_of_month", "month_of_year", "timezone"),
    "intervalschedule": ("id", "every", "period"),
    "clockedschedule": ("id", "clocked_time"),
    "solarschedule": ("id", "event", "latitude", "longitude"),
}
OPTIONAL = frozenset({("periodictask", "expire_seconds"), ("periodictask", "headers")})
TIMES = frozenset({"expires", "start_time", "last_run_at", "date_changed", "clocked_time"})
PERIODS = {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1, "microseconds": 1e-6}


def shown_url(url: str) -> str:
    """The source URL without its password."""
    from alma_schedule.stores.sql.errors import safe_url

    return safe_url(url)


def source_url(url: str) -> sa.URL:
    """``url`` parsed; a URL without a driver gets psycopg 3 (PostgreSQL) or PyMySQL (MySQL, MariaDB);
    an SQLite file must exist (connecting would create it)."""
    try:
        parsed = sa.make_url(url)
    except Exception:
        raise SourceUnavailable(f"--from {shown_url(url)} is not a database URL") from None
    backend = parsed.get_backend_name()
    if backend in ("postgresql", "postgres") and "+" not in parsed.drivername:
        return parsed.set(drivername="postgresql+psycopg")
    if backend in ("mysql", "mariadb") and "+" not in parsed.drivername:
        return parsed.set(drivername=f"{backend}+pymysql")
    if backend == "sqlite" and not (parsed.database and Path(parsed.database).is_file()):
        raise SourceUnavailable(f"--from {shown_url(url)}: no such SQLite file")
    return parsed


def _table(name: str, present: set[str]) -> sa.TableClause:
    cols = [
        sa.column(c, sa.DateTime(timezone=True)) if c in TIMES else sa.column(c) for c in COLUMNS[name] if c in present
    ]
    return sa.table(PREFIX + name, *cols)


def read_tables(url: str) -> dict[str, list[dict[str, Any]]]:
    """Every row of django-celery-beat's five tables at ``url`` (read only), keyed by table. Raises
    :class:`SourceUnavailable` (unreachable) or :class:`UnknownSourceSchema` (a table or column missing)."""
    try:
        engine = sa.create_engine(source_url(url))
    except SourceUnavailable:
        raise
    except Exception as exc:
        raise SourceUnavailable(f"--from {shown_url(url)}: {str(exc).splitlines()[0]}") from exc
    try:
        with engine.connect() as conn:
            inspector = sa.inspect(conn)
            out: dict[str, list[dict[str, Any]]] = {}
            for name, wanted in COLUMNS.items():
                if not inspector.has_table(PREFIX + name):
                    raise UnknownSourceSchema(
                        f"{shown_url(url)} has no table {PREFIX + name}: not a django-celery-beat 2.x database "
                        "(run its migrations: manage.py migrate django_celery_beat)"
                    )
                present = {c["name"] for c in inspector.get_columns(PREFIX + name)}
                missing = [c for c in wanted if c not in present and (name, c) not in OPTIONAL]
                if missing:
                    raise UnknownSourceSchema(
                        f"{PREFIX + name} has no column {missing[0]}: django-celery-beat's schema before 2.0 "
                        "(migrate it to 2.x first)"
                    )
                rows = conn.execute(sa.select(_table(name, present))).mappings()
                out[name] = [dict(r) for r in rows]
            conn.rollback()
            return out
    except (UnknownSourceSchema, SourceUnavailable):
        raise
    except sa.exc.SQLAlchemyError as exc:
        lines = str(getattr(exc, "orig", exc) or exc).strip().splitlines()
        line, password = lines[0] if lines else type(exc).__name__, engine.url.password
        line = line.replace(str(password), "***") if password else line
        raise SourceUnavailable(f"--from {shown_url(url)}: {line}") from exc
    finally:
        engine.dispose()


def default_zone(crontabs: list[dict[str, Any]]) -> tuple[str, str]:
    """The zone naive datetimes are read in without ``--tz``: the crontabs' one timezone (Django's
    ``TIME_ZONE``, its default), else UTC; and where it came from."""
    zones = Counter(str(r["timezone"]) for r in crontabs if r.get("timezone"))
    if len(zones) == 1:
        return next(iter(zones)), "the crontabs' timezone (Django's TIME_ZONE by default)"
    if zones:
        return "UTC", f"UTC: the crontabs name {len(zones)} timezones, none is Django's TIME_ZONE for sure"
    return "UTC", "UTC: no crontab names Django's TIME_ZONE"


Tables = Mapping[str, dict[Any, dict[str, Any]]]


def _schedule(row: Mapping[str, Any], tables: Tables, zone: str) -> tuple[str, dict[str, Any], list[str]]:
    from celery.schedules import crontab

    from alma_schedule.beat.convert import AppZone, _Refuse, convert_schedule

    kinds = [k for k in ("crontab", "interval", "clocked", "solar") if row.get(f"{k}_id") is not None]
    if len(kinds) != 1:
        raise Refuse(
            f"the task has {len(kinds)} schedules ({', '.join(kinds) or 'none'}); django-celery-beat needs one"
        )
    kind = kinds[0]
    table = {"crontab": "crontabschedule", "interval": "intervalschedule"}.get(kind, f"{kind}schedule")
    found = tables[table].get(row[f"{kind}_id"])
    if found is None:
        raise Refuse(f"its {kind} schedule {row[f'{kind}_id']} does not exist")
    try:
        if kind == "crontab":
            fields = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
            was = "crontab " + " ".join(str(found[f]) for f in fields) + f" ({found['timezone']})"
            value: Any = crontab(**{f: str(found[f]) for f in fields})
            out, notes = convert_schedule(value, AppZone(str(found["timezone"]), "the crontab's timezone"))
            return was, out, [n for n in notes if not n.startswith("read in ")]
        if kind == "interval":
            was = f"every {found['every']} {found['period']}"
            if found["period"] not in PERIODS:
                raise Refuse(f"interval period {found['period']!r} is not one of {', '.join(PERIODS)}")
            seconds = float(found["every"]) * PERIODS[str(found["period"])]
            out, _ = convert_schedule(timedelta(seconds=seconds), AppZone(zone, ""))
            return was, out, ["counted from the last run, as django-celery-beat does"]
    except _Refuse as exc:
        raise Refuse(str(exc)) from None
    if kind == "clocked":
        at = aware(found["clocked_time"], zone, "clocked_time")
        assert at is not None
        return f"clocked {at.isoformat()}", {"at": at.isoformat()}, []
    event, lat, lon = found["event"], float(found["latitude"]), float(found["longitude"])
    return f"solar {event} {lat} {lon}", {"solar": event, "lat": lat, "lon": lon}, []


def _convert(
    row: Mapping[str, Any], tables: Mapping[str, dict[Any, dict[str, Any]]], scope: Scope, zone: str
) -> Imported:
    name, task = str(row["name"]), row.get("task")
    was, notes = "?", list[str]()
    try:
        was, schedule, notes = _schedule(row, tables, zone)
        for field, key in (("start_time", "not_before"), ("expires", "not_after")):
            when = aware(row.get(field), zone, field)
            if when is not None:
                schedule[key] = when.isoformat()
        if row.get("one_off"):
            schedule["max_runs"] = 1
        try:
            args, kwargs = json.loads(row.get("args") or "[]"), json.loads(row.get("kwargs") or "{}")
            headers = json.loads(row.get("headers") or "{}")
        except ValueError as exc:
            raise Refuse(f"args, kwargs or headers is not JSON: {exc}") from None
        if not isinstance(headers, dict):
            raise Refuse("headers is not a JSON object")
        options = send_options(row, row.get("expire_seconds"), headers)
        spec = make_spec(scope, name, schedule, task_definition(task, args, kwargs, options))
        cursor = aware(row.get("last_run_at") or row.get("date_changed"), zone, "last_run_at")
        if row.get("last_run_at") is None:
            notes.append("never ran: the cursor is date_changed, as django-celery-beat reads it")
        enabled = bool(row.get("enabled"))
        if enabled and row.get("one_off") and (row.get("total_run_count") or 0) > 0:
            enabled, notes = False, [*notes, "one_off that already ran: imported disabled"]
        return Imported(name, task, was, spec, enabled=enabled, cursor=cursor, notes=tuple(notes))
    except Refuse as exc:
        return Imported(name, task, was, refused=str(exc))


def plan_dcb(
    url: str,
    scope: Scope,
    *,
    tz: str | None = None,
    runner: TaskRunner | None = None,
    kept: Mapping[str, str] | None = None,
    now: datetime | None = None,
) -> SourcePlan:
    """Read ``url``'s periodic tasks and convert each for ``scope`` (writes nothing anywhere).
    ``tz`` reads naive datetimes (default :func:`default_zone`); ``runner`` (the fleet app) refuses
    what it cannot send; ``kept`` names the entries left to the beat sync (skipped)."""
    data = read_tables(url)
    zone, zone_source = (tz, "--tz") if tz else default_zone(data["crontabschedule"])
    tables = {name: {r["id"]: r for r in rows} for name, rows in data.items() if name != "periodictask"}
    rows = sorted(data["periodictask"], key=lambda r: str(r["name"]))
    entries = refuse_past([sendable(runner, _convert(r, tables, scope, zone), IMPORT_DCB) for r in rows], now)
    return SourcePlan("import-dcb", shown_url(url), scope, zone, zone_source, tuple(skip_kept(entries, kept or {})))
