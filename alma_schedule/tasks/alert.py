"""The ``alma_schedule.alert`` task (the collect queue): post one overdue fire's "did not run" alert
(:func:`alma_schedule.alert_webhook.post_alert`), and until it is answered 2xx send itself again
after :func:`~alma_schedule.policies.overdue.alert_retry_delay` (20 s, doubling, 10 min cap),
pushing the fire's lease past that countdown first (``Store.alert_retry``) so no tick sends a
second chain meanwhile. At-least-once: a lost message is sent again by a tick once its lease ends;
the ``Idempotency-Key`` lets the receiver drop repeats; a delivered fire is never posted again.

docs/architecture.md, section "The modules, in detail" (tasks/alert.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from alma_schedule.model.names import ALERT_TASK
from alma_schedule.model.overdue import alert_key
from alma_schedule.model.time import parse_instant
from alma_schedule.policies.overdue import ALERT_LEASE, alert_retry_delay

if TYPE_CHECKING:
    from celery import Celery, Task

    from alma_schedule.tasks.composition import Composition

log = logging.getLogger("alma_schedule.alert")

__all__ = ["define_alert"]


def define_alert(app: Celery, composition: Composition, options: Callable[..., dict[str, Any]]) -> Task:
    """Register the alert task on ``app`` (``options``: the pinned options of our tasks). The poster
    (``alert_webhook``, which needs the ``openai`` extra's httpx) is imported when an alert is posted,
    so an app without that extra still defines its tasks."""

    @app.task(**options(ALERT_TASK, ignore_result=True), bind=True)
    def alert(self: Task, org: str, uid: str, routine_id: str, fire_at: str, attempt: int = 1) -> dict[str, Any]:
        """Post the alert of the fire ``(org, uid, routine_id, fire_at)``; on a failure send this
        task again after the back-off (``attempt`` counts the posts)."""
        from alma_schedule.alert_webhook import post_alert

        settings = composition.settings
        key = (org, uid, routine_id, parse_instant("fire_at", fire_at))
        store = composition.schedule().store
        now = settings.now()
        outcome = post_alert(store, settings, key, now=now)
        if outcome == "failed":
            delay = alert_retry_delay(attempt)
            if store.alert_retry(key, lease_until=now + delay + ALERT_LEASE):
                self.apply_async(
                    args=[org, uid, routine_id, fire_at],
                    kwargs={"attempt": attempt + 1},
                    countdown=delay.total_seconds(),
                )
                log.info("alert %s: retry %d in %gs", alert_key(*key), attempt + 1, delay.total_seconds())
        return {"alert": alert_key(*key), "outcome": outcome, "attempt": attempt}

    return alert
