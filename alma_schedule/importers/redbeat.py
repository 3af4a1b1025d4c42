"""``import-redbeat``: RedBeat's entries (the ``<prefix><name>`` hashes listed in ``<prefix>:schedule``),
read from Redis without RedBeat, each converted to a ``task`` routine with its last run as the cursor.

docs/architecture.md, section "The modules, in detail" (importers/redbeat.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from alma_schedule.errors import SourceUnavailable, UnknownSourceSchema
from alma_schedule.importers.common import (
    Imported,
    Refuse,
    SourcePlan,
    make_spec,
    refuse_past,
    send_options,
    sendable,
    skip_kept,
    task_definition,
)
from alma_schedule.importers.rrule import rrule_to_cron
from alma_schedule.model import Scope
from alma_schedule.model.provenance import IMPORT_REDBEAT

if TYPE_CHECKING:
    from alma_schedule.runners.task import TaskRunner

DEFAULT_PREFIX = "redbeat:"
OPTIONS = ("queue", "priority", "expires", "exchange", "routing_key", "headers")
STATIC = "a static entry (RedBeat saved it from beat_schedule): the beat sync owns it"


def shown_url(url: str) -> str:
    """The Redis URL without its password."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    return url.replace(f":{parts.password}@", ":***@", 1)


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def read_entries(url: str, prefix: str) -> tuple[list[tuple[str, Any, Any]], set[str]]:
    """``(key, definition, meta)`` of each entry in ``<prefix>:schedule`` and the statics' names (read
    only). :class:`SourceUnavailable` when Redis cannot be read, :class:`UnknownSourceSchema` when
    nothing there is RedBeat's under ``prefix``."""
    import redis

    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=10, socket_timeout=30)
        try:
            keys = sorted(_text(k) for k in client.zrange(prefix + ":schedule", 0, -1))
            statics = {_text(s) for s in client.smembers(prefix + ":statics")}
            out = [(key, *client.hmget(key, ["definition", "meta"])) for key in keys]
            pattern = "".join(f"[{c}]" if c in "*?[]\\" else c for c in prefix) + "*"
            anything = bool(keys) or next(iter(client.scan_iter(match=pattern, count=100)), None) is not None
        finally:
            client.close()
    except (redis.RedisError, ValueError) as exc:
        first = next(iter(str(exc).splitlines()), type(exc).__name__)
        raise SourceUnavailable(f"--redis {shown_url(url)}: {first}") from exc
    if not anything:
        raise UnknownSourceSchema(
            f"{shown_url(url)} holds no key {prefix}:schedule nor any key {prefix}*: not RedBeat's "
            "(check --key-prefix and the db number)"
        )
    return [(str(k), d, m) for k, d, m in out], statics


def _datetime(raw: Any) -> datetime | None:
    """RedBeat's JSON datetime (``__type__: datetime`` with a zone key or an offset in seconds)."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or raw.get("__type__") != "datetime":
        raise Refuse(f"last_run_at {raw!r} is not RedBeat's datetime")
    fields = {k: raw[k] for k in ("year", "month", "day", "hour", "minute", "second", "microsecond")}
    zone = raw.get("timezone", "UTC")
    tz = timezone(timedelta(seconds=zone)) if isinstance(zone, (int, float)) else ZoneInfo(str(zone))
    return datetime(**fields, tzinfo=tz).astimezone(UTC)


def _schedule(raw: Any, zone: str) -> tuple[str, dict[str, Any], list[str]]:
    from celery.schedules import crontab, schedule

    from alma_schedule.beat.convert import AppZone, _Refuse, convert_schedule

    kind = raw.get("__type__") if isinstance(raw, Mapping) else None
    if kind == "rrule":
        out, notes = rrule_to_cron(raw)
        return "rrule " + json.dumps({k: v for k, v in raw.items() if v is not None and k != "__type__"}), out, notes
    try:
        if kind == "crontab":
            fields = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
            was = "crontab " + " ".join(str(raw.get(f, "*")) for f in fields)
            out, notes = convert_schedule(crontab(**{f: raw.get(f, "*") for f in fields}), AppZone(zone, "--tz"))
            return was, out, [n for n in notes if not n.startswith("read in ")]
        if kind == "interval":
            every = schedule(run_every=float(raw["every"]), relative=bool(raw.get("relative")))
            out, _ = convert_schedule(every, AppZone(zone, "--tz"))
            return f"every {raw['every']:g}s", out, ["counted from the last run, as RedBeat does"]
    except _Refuse as exc:
        raise Refuse(str(exc)) from None
    except (KeyError, TypeError, ValueError) as exc:
        raise Refuse(f"the {kind} schedule is malformed: {exc}") from None
    if kind == "solar":  # RedBeat's encoder has none: an entry written by other hands
        try:
            where = {"solar": str(raw["event"]), "lat": float(raw["lat"]), "lon": float(raw["lon"])}
        except (KeyError, TypeError, ValueError) as exc:
            raise Refuse(f"the solar schedule is malformed: {exc}") from None
        return f"solar {where['solar']} {where['lat']} {where['lon']}", where, []
    raise Refuse(f"schedule type {kind or type(raw).__name__!r} has no equivalent (crontab, interval, rrule convert)")


def _convert(key: str, definition: Any, meta: Any, scope: Scope, zone: str, prefix: str) -> Imported:
    name, task, was = key[len(prefix) :] if key.startswith(prefix) else key, None, "?"
    try:
        try:
            body = json.loads(definition or b"null")
            state = json.loads(meta or b"{}")
        except ValueError as exc:
            raise Refuse(f"the entry's definition or meta is not JSON: {exc}") from None
        if not isinstance(body, Mapping):
            raise Refuse(f"{key} has no definition")
        name, task = str(body.get("name") or name), body.get("task")
        was, schedule, notes = _schedule(body.get("schedule"), zone)
        options = body.get("options") or {}
        extra = sorted(str(k) for k in options if k not in OPTIONS)
        if extra:
            raise Refuse(f"send option {extra[0]!r} is not carried by task routines ({', '.join(OPTIONS[:3])})")
        headers = options.get("headers") or {}
        if not isinstance(headers, Mapping):
            raise Refuse("options.headers is not an object")
        opts = send_options(options, options.get("expires"), headers)
        spec = make_spec(scope, name, schedule, task_definition(task, body.get("args"), body.get("kwargs"), opts))
        cursor = _datetime(state.get("last_run_at") if isinstance(state, Mapping) else None)
        if cursor is None:
            notes.append("never ran: due at once, as RedBeat runs it")
        enabled = body.get("enabled", True) is not False
        return Imported(name, task, was, spec, enabled=enabled, cursor=cursor, notes=tuple(notes))
    except Refuse as exc:
        return Imported(name, task if isinstance(task, str) else None, was, refused=str(exc))


def plan_redbeat(
    url: str,
    scope: Scope,
    *,
    prefix: str = DEFAULT_PREFIX,
    tz: str | None = None,
    zone_source: str = "UTC: RedBeat stores no zone (--tz)",
    runner: TaskRunner | None = None,
    kept: Mapping[str, str] | None = None,
    now: datetime | None = None,
) -> SourcePlan:
    """Read RedBeat's entries at ``url`` and convert each for ``scope`` (writes nothing anywhere).
    Crontabs and intervals read in ``tz`` (default UTC); statics and ``kept`` names are skipped."""
    zone = tz or "UTC"
    rows, statics = read_entries(url, prefix)
    entries = [sendable(runner, _convert(k, d, m, scope, zone, prefix), IMPORT_REDBEAT) for k, d, m in rows]
    entries = refuse_past(entries, now)
    skip = dict.fromkeys(statics, STATIC) | dict(kept or {})
    return SourcePlan("import-redbeat", shown_url(url), scope, zone, zone_source, tuple(skip_kept(entries, skip)))
