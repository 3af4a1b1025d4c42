"""``import-beat``: read a Celery app's ``beat_schedule``, show what each entry becomes, register them.

docs/architecture.md, section "The modules, in detail" (beat/importer.py).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from alma_schedule.beat.convert import (
    ANCHOR_NOTE,
    AND_OR_MARK,
    AppZone,
    Conversion,
    app_zone,
    convert_beat_schedule,
)
from alma_schedule.errors import RegistrationRefused
from alma_schedule.model import Scope
from alma_schedule.model.provenance import import_beat_source
from alma_schedule.policies.allow import TaskAllow
from alma_schedule.policies.wake import FIXED_CADENCE_NOTE
from alma_schedule.runners.task import TaskDefinition, TaskRunner

if TYPE_CHECKING:
    from celery import Celery

    from alma_schedule.engine import Scheduler


def system_local_zone(environ: Mapping[str, str] | None = None, *, root: str = "/") -> str | None:
    """The IANA name of the zone the C library's local time uses, or None when it cannot be told.

    ``TZ`` wins (``:Area/City`` or a zoneinfo path); else the ``/etc/localtime`` link target; else
    ``/etc/timezone``. A ``TZ`` that is not an IANA name (a POSIX rule string) gives None.
    """
    from alma_schedule.core.zones import available_zones

    env = os.environ if environ is None else environ
    zones = available_zones()

    def known(name: str | None) -> str | None:
        return name if name and name in zones else None

    tz = env.get("TZ")
    if tz is not None:
        tz = tz.lstrip(":").strip()
        if "zoneinfo/" in tz:
            tz = tz.split("zoneinfo/", 1)[1]
        return known(tz)
    link = Path(root, "etc/localtime")
    try:
        target = os.path.realpath(link)
    except OSError:  # pragma: no cover
        target = ""
    if "zoneinfo/" in target:
        found = known(target.split("zoneinfo/", 1)[1])
        if found:
            return found
    try:
        return known(Path(root, "etc/timezone").read_text(encoding="utf-8").strip())
    except OSError:
        return None


@dataclass(frozen=True, slots=True)
class ImportPlan:
    """What an import would register: every entry of the app's ``beat_schedule``, converted or refused."""

    app: str
    scope: Scope
    zone: AppZone
    conversions: tuple[Conversion, ...]

    @property
    def converted(self) -> tuple[Conversion, ...]:
        return tuple(c for c in self.conversions if c.ok)

    @property
    def refused(self) -> tuple[Conversion, ...]:
        return tuple(c for c in self.conversions if not c.ok)

    def to_dict(self) -> dict[str, Any]:
        return {
            "app": self.app,
            "scope": str(self.scope),
            "zone": self.zone.zone,
            "zone_source": self.zone.source,
            "entries": [c.to_dict() for c in self.conversions],
        }


_AUTO: Any = object()


def plan_import(
    app: Celery,
    scope: Scope,
    *,
    local_zone: str | None = _AUTO,
    track: bool = False,
    deadline: str | None = None,
    allow: TaskAllow | None = None,
    source: str | None = None,
) -> ImportPlan:
    """Convert ``app``'s ``beat_schedule`` for ``scope`` (imports the app's modules; writes nothing).
    Each routine records ``source`` (default ``import-beat:<app>``) and its entry's name.

    docs/architecture.md, "The modules, in detail" (beat/importer.py, plan_import).
    """
    runner = TaskRunner(app, allow=allow)
    known = set(runner.tasks())
    zone = app_zone(
        app.conf.timezone,
        bool(app.conf.enable_utc),
        system_local_zone() if local_zone is _AUTO else local_zone,
    )
    conversions = convert_beat_schedule(
        app.conf.beat_schedule, scope, zone, known_tasks=known, track=track, deadline=deadline
    )
    name = app.main or "?"
    origin = source or import_beat_source(name)
    conversions = [_sendable(runner, c, origin) for c in conversions]
    return ImportPlan(name, scope, zone, tuple(conversions))


def _sendable(runner: TaskRunner, conv: Conversion, source: str) -> Conversion:
    """``conv`` with its provenance, or refused with the runner's reason (the allow-list; tracking when tracked)."""
    if conv.spec is None:
        return conv
    found = runner.problem(TaskDefinition.parse(conv.spec.definition))
    if found is not None:
        return dataclasses.replace(conv, spec=None, refused=found[1], notes=())
    return dataclasses.replace(conv, spec=dataclasses.replace(conv.spec, source=source, source_entry=conv.name))


def plan_warnings(plan: ImportPlan, tick_period: timedelta) -> list[str]:
    """One line per warning of ``plan``: each interval shorter than ``tick_period`` (only a
    fixed-cadence clock runs it at most once per tick: ``FIXED_CADENCE_NOTE``), each crontab
    refused for AND-ing its day fields, then one line on anchoring naming every interval entry."""
    from alma_schedule.core.interval import parse_interval

    lines: list[str] = []
    anchored: list[str] = []
    for conv in plan.conversions:
        if conv.spec is not None and "every" in conv.spec.schedule:
            every = conv.spec.schedule["every"]
            if parse_interval(every) < tick_period:
                lines.append(
                    f"{conv.name}: every {every} is shorter than the tick period "
                    f"({int(tick_period.total_seconds())}s): {FIXED_CADENCE_NOTE}"
                )
        if ANCHOR_NOTE in conv.notes:
            anchored.append(conv.name)
        if conv.refused and AND_OR_MARK in conv.refused:
            lines.append(f"{conv.name}: refused: {conv.refused}")
    if anchored:
        lines.append(f"anchoring ({', '.join(anchored)}): {ANCHOR_NOTE}")
    return lines


@dataclass(frozen=True, slots=True)
class Applied:
    """One entry after ``apply_import``: ``created``, ``updated``, ``unchanged`` or ``refused``."""

    name: str
    outcome: str
    detail: str | None = None
    next_fires: tuple[datetime, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "outcome": self.outcome,
            "detail": self.detail,
            "next_fires": [f.isoformat() for f in self.next_fires],
        }


def apply_import(
    schedule: Scheduler, plan: ImportPlan, *, now: datetime | None = None, actor: str | None = None
) -> list[Applied]:
    """Register every converted entry of ``plan`` (one ``register`` each, its audit event naming
    ``actor``); refused ones are skipped.

    Idempotent: an entry whose routine is already registered unchanged reports ``unchanged`` and
    writes nothing. The engine must serve kind ``task`` (a :class:`TaskRunner` or a resolver).
    """
    out: list[Applied] = []
    for conv in plan.conversions:
        if conv.spec is None:
            out.append(Applied(conv.name, "refused", conv.refused))
            continue
        existed = schedule.store.get_routine(conv.spec.scope, conv.spec.routine_id) is not None
        try:
            receipt = schedule.register(conv.spec, now=now, actor=actor)
        except RegistrationRefused as exc:
            out.append(Applied(conv.name, "refused", exc.reason))
            continue
        outcome = "unchanged" if not receipt.changed else ("updated" if existed else "created")
        detail = "; ".join(receipt.warnings) or None
        out.append(Applied(conv.name, outcome, detail, receipt.next_fires))
    return out
