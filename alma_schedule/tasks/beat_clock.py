"""``install(app, beat_clock=True)``: the fleet's own ``celery beat`` is the clock.

docs/architecture.md, section "The modules, in detail" (tasks/beat_clock.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from alma_schedule.errors import ConfigurationError
from alma_schedule.model import TICK_TASK

if TYPE_CHECKING:
    from celery import Celery

    from alma_schedule.settings import Settings

log = logging.getLogger(__name__)

#: The name of the one entry we add to beat's schedule.
TICK_ENTRY = TICK_TASK
#: The scheduler classes whose entries are exactly ``app.conf.beat_schedule`` (plus Celery's own).
CELERY_SCHEDULERS = ("celery.beat.Scheduler", "celery.beat.PersistentScheduler")


@dataclass(frozen=True, slots=True)
class BeatCheck:
    """What the beat_schedule holds: entries import-beat converts, entries it refuses (with the
    reason), and entries that send our tick themselves. ``celery.*`` entries are left out."""

    convertible: tuple[str, ...]
    kept: tuple[tuple[str, str], ...]
    ticks: tuple[str, ...]


def check_beat_schedule(app: Celery) -> BeatCheck:
    """Convert ``app``'s ``beat_schedule`` as ``import-beat`` does (imports its task modules; writes nothing)."""
    from alma_schedule.beat.importer import plan_import
    from alma_schedule.model import Scope

    plan = plan_import(app, Scope("beat", "clock"))  # the scope does not change what converts
    convertible: list[str] = []
    kept: list[tuple[str, str]] = []
    ticks: list[str] = []
    for conv in plan.conversions:
        if conv.name.startswith("celery.") or (conv.task or "").startswith("celery."):
            continue
        if conv.task == TICK_TASK:
            ticks.append(conv.name)
        elif conv.ok:
            convertible.append(conv.name)
        else:
            kept.append((conv.name, conv.refused or "cannot be converted"))
    return BeatCheck(tuple(convertible), tuple(kept), tuple(ticks))


def tick_entry(settings: Settings) -> dict[str, Any]:
    """The fixed-period tick entry (schedulers other than Celery's own): ``alma_schedule.tick``
    every ``tick_period``, expiring after ``tick_expires``, JSON-serialized."""
    from celery.schedules import schedule

    return {
        "task": TICK_TASK,
        "schedule": schedule(run_every=settings.tick_period),
        "options": {"expires": settings.tick_expires.total_seconds(), "serializer": "json"},
    }


def scheduler_name(scheduler: object) -> str:
    cls = type(scheduler)
    return f"{cls.__module__}.{cls.__qualname__}"


def start_clock(app: Celery, scheduler: Any, settings: Settings, *, keep_beat_entries: bool) -> None:
    """Check ``app``'s beat_schedule against ``scheduler`` and add the tick entry; raise
    :class:`ConfigurationError` (one line, the names) where beat must not start."""
    name = scheduler_name(scheduler)
    if name not in CELERY_SCHEDULERS and not keep_beat_entries:
        raise ConfigurationError(
            f"beat runs the scheduler {name}, which keeps its entries in its own store: alma-schedule "
            "cannot check that none of them also runs as a routine (twice); import them and remove them "
            "there, then pass install(app, beat_clock=True, keep_beat_entries=True) to start beat with it"
        )
    check = check_beat_schedule(app)
    if check.ticks:
        raise ConfigurationError(
            f"beat_schedule entries {', '.join(check.ticks)} send {TICK_TASK} themselves: "
            "install(app, beat_clock=True) adds the one tick entry; remove them"
        )
    if settings.beat_sync and not keep_beat_entries:
        from alma_schedule.tasks.beat_sync import start_sync

        start_sync(app, scheduler, settings)  # the entries leave beat; they run as routines
    elif check.convertible:
        names = ", ".join(check.convertible)
        if not keep_beat_entries:
            raise ConfigurationError(
                f"beat_schedule still holds entries that import-beat converts: {names}; each would run "
                "twice (from beat and as a routine): import them (alma-schedule import-beat MODULE:APP "
                "ORG/UID --apply) and remove them from beat_schedule, keep them in beat with "
                "install(app, beat_clock=True, keep_beat_entries=True), or sync them (alma_beat_sync = True)"
            )
        log.warning(
            "alma-schedule beat clock: beat keeps running the convertible entries %s "
            "(keep_beat_entries=True): do not import them too, or they run twice",
            names,
        )
    if check.kept and not (settings.beat_sync and not keep_beat_entries):
        log.warning(
            "alma-schedule beat clock: entries import-beat cannot convert stay in beat: %s",
            "; ".join(f"{n} ({why})" for n, why in check.kept),
        )
    if name in CELERY_SCHEDULERS:
        from alma_schedule.tasks.beat_schedule import hint_entry
        from alma_schedule.waker import store_hint

        entry = hint_entry(settings, store_hint(settings))
        how = f"at the next due instant (heartbeat {settings.tick_period.total_seconds():g}s)"
    else:
        entry = tick_entry(settings)
        how = f"every {settings.tick_period.total_seconds():g}s"
        log.warning(
            "alma-schedule beat clock: under %s the tick entry is a fixed-period entry: fires start up to "
            "ALMA_TICK_PERIOD (%gs) late; Celery's own scheduler or `alma-schedule clock run` wake at the "
            "next due instant",
            name,
            settings.tick_period.total_seconds(),
        )
    scheduler.update_from_dict({TICK_ENTRY: entry})
    installed = _installed_schedule(scheduler)
    if installed is None or (name in CELERY_SCHEDULERS and installed is not entry["schedule"]):
        raise ConfigurationError(
            f"the tick entry {TICK_ENTRY} is not in beat's schedule after it was added (scheduler {name}): "
            "no tick would be sent"
        )
    log.info(
        "alma-schedule beat clock: %s %s (expires after %gs) added to %s",
        TICK_TASK,
        how,
        settings.tick_expires.total_seconds(),
        name,
    )


def _installed_schedule(scheduler: Any) -> Any:
    """The schedule object of our entry as the scheduler holds it, or None when it holds none."""
    try:
        entry = scheduler.schedule.get(TICK_ENTRY)
    except Exception:  # a scheduler whose schedule cannot be read here
        return None
    return None if entry is None else getattr(entry, "schedule", None)


def _stop(service: Any, reason: str) -> None:
    log.error("alma-schedule beat clock: beat stops: %s", reason)
    try:
        service.scheduler.close()
    except Exception:  # a scheduler that cannot close: we exit all the same
        log.debug("closing the scheduler failed", exc_info=True)
    raise SystemExit(1)


def connect_beat_clock(
    app: Celery, settings_of: Callable[[], Settings], *, keep_beat_entries: bool = False
) -> Callable[..., None]:
    """Connect the ``beat_init`` receiver of ``app`` (a beat of another app is left alone); return it.

    ``settings_of`` gives the settings when beat starts (validated then, not at import).
    """
    from celery.signals import beat_init

    def on_beat_init(sender: Any = None, **_: Any) -> None:
        if getattr(sender, "app", None) is not app:
            return
        try:
            start_clock(app, sender.scheduler, settings_of(), keep_beat_entries=keep_beat_entries)
        except SystemExit:
            raise
        except Exception as exc:  # a bad setting, a broken beat_schedule: beat must not run without a clock
            _stop(sender, str(exc) if isinstance(exc, ConfigurationError) else f"{type(exc).__name__}: {exc}")

    beat_init.connect(on_beat_init, weak=False)
    return on_beat_init
