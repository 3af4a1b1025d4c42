"""The beat sync in ``celery beat``: the convertible entries leave beat's schedule at once, and
:func:`alma_schedule.beat.sync.apply_sync` runs at start, then at each wake-up until the store answers.

docs/architecture.md, section "The schedule stays in code".
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from alma_schedule.beat.sync import SyncPlan, apply_sync, plan_sync, summary, sync_scope

if TYPE_CHECKING:
    from celery import Celery

    from alma_schedule.settings import Settings

log = logging.getLogger(__name__)


class PendingSync:
    """One beat's sync: :meth:`attempt` until it succeeds (logged once failing, once succeeding)."""

    def __init__(self, app: Celery, plan: SyncPlan, settings: Settings) -> None:
        self.app, self.plan, self.settings = app, plan, settings
        self.done = False
        self._failed = False
        self._lock = threading.Lock()

    def attempt(self) -> bool:
        """Sync once unless already done; True once it has succeeded. Never raises."""
        with self._lock:
            if self.done:
                return True
            try:
                from alma_schedule.tasks.composition import composition_of

                composition = composition_of(self.app)
                if composition is None:  # pragma: no cover - start_clock runs only where install() ran
                    return False
                changes = apply_sync(composition.schedule(), self.plan, self.settings.now())
            except Exception as exc:  # the store down, unmigrated, a driver error: retried at the next wake-up
                if not self._failed:
                    self._failed = True
                    log.warning(
                        "alma-schedule beat sync: %s not synced into %s (%s: %s): beat does not run them; "
                        "retried at each wake-up until the store answers",
                        ", ".join(self.plan.names) or "(no entries)",
                        self.plan.scope,
                        type(exc).__name__,
                        exc,
                    )
                _forget_store(self.app)
                return False
            self.done = True
        for change in changes:
            if change.action == "ambiguous":
                log.warning("alma-schedule beat sync: %s not synced: %s", change.name, change.detail)
            elif change.action == "refused":
                log.error("alma-schedule beat sync: %s refused, it runs nowhere: %s", change.name, change.detail)
        log.warning(
            "alma-schedule beat sync: beat_schedule of %s synced into %s%s: %s",
            self.plan.app,
            self.plan.scope,
            " (the store answered)" if self._failed else "",
            summary(changes),
        )
        return True


def _forget_store(app: Celery) -> None:
    """Drop the composition's store after a failure, so the next attempt opens a new one."""
    from alma_schedule.tasks.composition import composition_of

    composition = composition_of(app)
    if composition is not None:
        try:
            composition.close()
        except Exception:  # an already broken store
            log.debug("closing the store failed", exc_info=True)


def leave_beat(scheduler: Any, names: tuple[str, ...]) -> None:
    """Remove ``names`` from beat's in-memory schedule (Celery's schedulers): beat never sends them."""
    schedule = scheduler.schedule
    for name in names:
        schedule.pop(name, None)
    left = [n for n in names if n in scheduler.schedule]
    if left:
        from alma_schedule.errors import ConfigurationError

        raise ConfigurationError(f"beat still holds the synced entries {', '.join(left)} after they were removed")


def start_sync(app: Celery, scheduler: Any, settings: Settings) -> PendingSync:
    """Plan the sync of ``app`` (a bad ``alma_beat_sync_scope`` raises: beat stops), take the
    entries out of beat, list the ones beat keeps, and sync now or at the next wake-ups."""
    from alma_schedule.policies.allow import TaskAllow

    scope = sync_scope(app, settings)
    plan = plan_sync(app, scope, prune=settings.beat_sync_prune, allow=TaskAllow.from_settings(settings))
    leave_beat(scheduler, plan.names)
    if plan.kept:
        log.warning(
            "alma-schedule beat sync: entries that do not convert stay in beat: %s",
            "; ".join(f"{n} ({why})" for n, why in plan.kept),
        )
    pending = PendingSync(app, plan, settings)
    if not pending.attempt():
        tick = scheduler.tick

        def tick_then_sync(*args: Any, **kwargs: Any) -> Any:
            if not pending.done:
                pending.attempt()
            return tick(*args, **kwargs)

        scheduler.tick = tick_then_sync
    return pending
