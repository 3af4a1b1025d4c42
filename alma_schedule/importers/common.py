"""What ``import-dcb`` and ``import-redbeat`` share: an entry read from the incumbent, what it
becomes (a ``task`` routine with its cursor) or why not, and the one-transaction apply.

docs/architecture.md, section "The modules, in detail" (importers/).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from alma_schedule.beat.importer import Applied
from alma_schedule.errors import InvalidInput, RegistrationRefused
from alma_schedule.model import RoutineSpec, Scope, check_id
from alma_schedule.runners.task import KIND, TaskDefinition

if TYPE_CHECKING:
    from alma_schedule.engine import Scheduler
    from alma_schedule.runners.task import TaskRunner

#: The headers of Celery's message protocol (v2): a source entry setting one is refused.
PROTOCOL_HEADERS = frozenset(
    "lang task id shadow eta expires group group_index retries timelimit root_id parent_id argsrepr "
    "kwargsrepr origin ignore_result replaced_task_nesting stamped_headers stamps".split()
)
SECOND = timedelta(seconds=1)


class Refuse(Exception):
    """One entry cannot convert: the message is the reason shown in the dry run."""


@dataclass(frozen=True, slots=True)
class Imported:
    """One source entry: the routine it becomes (``spec``, ``enabled``, ``cursor`` = its last run),
    or why it is ``refused`` or ``skipped`` (left to the beat sync)."""

    name: str
    task: str | None
    was: str
    spec: RoutineSpec | None = None
    refused: str | None = None
    skipped: str | None = None
    enabled: bool = True
    cursor: datetime | None = None
    notes: tuple[str, ...] = ()

    @property
    def becomes(self) -> str:
        if self.spec is None:
            return "skipped" if self.skipped else "refused"
        s = self.spec.schedule
        text = f"cron {s['cron']!r} in {s.get('tz') or 'UTC'}" if "cron" in s else ""
        text = text or (
            f"every {s['every']}"
            if "every" in s
            else json.dumps({k: s[k] for k in s if k in ("at", "solar", "lat", "lon")})
        )
        bounds = [f"{k} {s[k]}" for k in ("not_before", "not_after", "max_runs") if k in s]
        return "; ".join([text, *bounds]) + ("" if self.enabled else " (disabled)")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "task": self.task,
            "source_schedule": self.was,
            "becomes": self.becomes,
            "schedule": None if self.spec is None else dict(self.spec.schedule),
            "definition": None if self.spec is None else dict(self.spec.definition),
            "enabled": self.enabled,
            "cursor": None if self.cursor is None else self.cursor.isoformat(),
            "refused": self.refused,
            "skipped": self.skipped,
            "notes": list(self.notes),
        }


@dataclass(frozen=True, slots=True)
class SourcePlan:
    """Every entry of one source, converted, refused or skipped; ``zone`` reads naive datetimes."""

    command: str
    source: str
    scope: Scope
    zone: str
    zone_source: str
    entries: tuple[Imported, ...]

    @property
    def converted(self) -> tuple[Imported, ...]:
        return tuple(e for e in self.entries if e.spec is not None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "source": self.source,
            "scope": str(self.scope),
            "zone": self.zone,
            "zone_source": self.zone_source,
            "entries": [e.to_dict() for e in self.entries],
        }


def routine_id(name: str) -> str:
    """The entry's name as its routine's id, or :class:`Refuse` with why not."""
    try:
        check_id("routine id (the entry's name)", name)
    except InvalidInput as exc:
        raise Refuse(str(exc)) from None
    return name


def send_options(source: Mapping[str, Any], expire_seconds: Any, headers: Mapping[str, Any]) -> dict[str, Any]:
    """The task routine's ``options``: ``exchange``/``routing_key`` only where they name the queue
    (Celery's direct exchange of a queue is named like it), no header at all (a protocol one named)."""
    queue, priority = source.get("queue") or None, source.get("priority")
    exchange, routing_key = source.get("exchange"), source.get("routing_key")
    if routing_key:
        if queue is not None and routing_key != queue:
            raise Refuse(f"routing_key {routing_key!r} does not route to the queue {queue!r}: set one queue only")
        queue = routing_key
    if exchange and exchange != queue:
        raise Refuse(
            f"exchange {exchange!r} is not the direct exchange of a queue ({queue or 'none named'}): "
            "task routines send to a queue (options.queue), not through an exchange"
        )
    if headers:
        protocol = sorted(k for k in headers if k in PROTOCOL_HEADERS)
        if protocol:
            raise Refuse(f"headers {', '.join(protocol)} are keys of Celery's message protocol")
        raise Refuse(f"headers {', '.join(sorted(map(str, headers)))}: task routines send no custom header")
    out: dict[str, Any] = {}
    if queue is not None:
        out["queue"] = queue
    if priority is not None:
        out["priority"] = priority
    if expire_seconds:
        out["expires"] = expire_seconds
    return out


def task_definition(task: str | None, args: Any, kwargs: Any, options: Mapping[str, Any]) -> dict[str, Any]:
    """The ``task`` routine's definition (checked as registration checks it), or :class:`Refuse`."""
    if not task or not task.strip():
        raise Refuse("the entry has no task name")
    definition: dict[str, Any] = {"task": task}
    if args:
        definition["args"] = list(args) if isinstance(args, (list, tuple)) else args
    if kwargs:
        definition["kwargs"] = kwargs
    if options:
        definition["options"] = dict(options)
    try:
        return TaskDefinition.parse(definition).to_json()
    except InvalidInput as exc:
        raise Refuse(str(exc)) from None


def sendable(runner: TaskRunner | None, entry: Imported, source: str) -> Imported:
    """``entry`` with its provenance (``source``, its name), or refused by the fleet app (unknown
    task, the allow-lists); without an app nothing is asked."""
    if entry.spec is None:
        return entry
    if runner is not None:
        found = runner.problem(TaskDefinition.parse(entry.spec.definition))
        if found is not None:
            return dataclasses.replace(entry, spec=None, refused=found[1])
    spec = dataclasses.replace(entry.spec, source=source, source_entry=entry.name)
    return dataclasses.replace(entry, spec=spec)


def refuse_past(entries: Sequence[Imported], now: datetime | None) -> list[Imported]:
    """Each entry whose schedule registration would refuse at ``now`` (an ``at`` already past) refused
    with that reason, so the dry run shows it (None: nothing checked)."""
    from alma_schedule.core import validate_schedule
    from alma_schedule.errors import InvalidSchedule

    out = list(entries)
    for i, e in enumerate(out):
        if e.spec is not None and now is not None:
            try:
                validate_schedule(e.spec.schedule, now=now)
            except InvalidSchedule as exc:
                out[i] = dataclasses.replace(e, spec=None, refused=str(exc))
    return out


def skip_kept(entries: Sequence[Imported], kept: Mapping[str, str]) -> list[Imported]:
    """Each entry named in ``kept`` (name -> why) becomes skipped with that reason."""
    return [
        dataclasses.replace(e, spec=None, refused=None, skipped=kept[e.name]) if e.name in kept else e for e in entries
    ]


def _with_cursor(prepared: Any, entry: Imported) -> Any:
    """A new routine's row from the source's state: its last run as the cursor (an interval anchored
    on it, as the incumbents count intervals), disabled when the entry was."""
    from alma_schedule.core import Every
    from alma_schedule.engine.register import due_from

    row = prepared.routine
    if entry.cursor is not None:
        last = entry.cursor.replace(microsecond=0)
        anchor = last if isinstance(prepared.schedule, Every) else row.registered_at
        row = dataclasses.replace(row, registered_at=anchor, last_fire=last)
        row = dataclasses.replace(row, next_due_at=due_from(row, prepared.schedule, prepared.policy, last))
    if not entry.enabled:
        row = dataclasses.replace(row, enabled=False, next_due_at=None)
    return row


def apply_plan(
    schedule: Scheduler, plan: SourcePlan, *, now: datetime | None = None, actor: str | None = None
) -> list[Applied]:
    """Register every convertible entry of ``plan`` in ONE store transaction (``put_routines``, each
    audit event naming ``actor``); an entry registration refuses is reported refused, the others are
    still written. Idempotent."""
    out: list[Applied] = []
    batch: list[tuple[Any, str | None]] = []
    for entry in plan.entries:
        if entry.spec is None:
            out.append(Applied(entry.name, "skipped" if entry.skipped else "refused", entry.skipped or entry.refused))
            continue
        spec = dataclasses.replace(entry.spec, source=plan.command, source_entry=entry.name)  # import-dcb, ...
        try:
            prepared = schedule.prepare(spec, now=now)
        except RegistrationRefused as exc:
            out.append(Applied(entry.name, "refused", exc.reason))
            continue
        if not prepared.changed:
            out.append(Applied(entry.name, "unchanged"))
            continue
        live = prepared.live
        row = prepared.routine if live is not None else _with_cursor(prepared, entry)
        batch.append((row, None if live is None else live.config_revision))
        out.append(
            Applied(entry.name, "updated" if live is not None else "created", "; ".join(prepared.warnings) or None)
        )
    if batch:
        schedule.store.put_routines(batch, now=schedule.now(now), actor=actor)
    return out


def make_spec(scope: Scope, name: str, schedule: Mapping[str, Any], definition: Mapping[str, Any]) -> RoutineSpec:
    """The routine spec of one entry, its schedule checked as the core reads it (a form this version
    does not know, e.g. solar before solar schedules exist, is :class:`Refuse` with the core's reason)."""
    from alma_schedule.core import parse_policy, parse_schedule
    from alma_schedule.errors import InvalidSchedule

    try:
        parse_schedule({k: v for k, v in schedule.items() if k not in ("not_before", "not_after", "max_runs")})
        parse_policy(schedule)
    except InvalidSchedule as exc:
        raise Refuse(str(exc)) from None
    return RoutineSpec(scope.org, scope.uid, routine_id(name), KIND, dict(schedule), dict(definition))


def aware(value: object, zone: str, what: str) -> datetime | None:
    """A source's datetime as aware UTC: a naive one read in ``zone``; text parsed as ISO 8601."""
    from zoneinfo import ZoneInfo

    from alma_schedule.model import aware_utc

    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise Refuse(f"{what} {value!r} is not a date and time") from None
    if not isinstance(value, datetime):
        raise Refuse(f"{what} {value!r} is not a date and time")
    if value.tzinfo is None:
        value = value.replace(tzinfo=ZoneInfo(zone))
    try:
        return aware_utc(what, value)
    except InvalidInput as exc:
        raise Refuse(str(exc)) from None
