"""The tick's step of the "did not run" alarm: the overdue fires (``Store.overdue``, asked at most
every :data:`CHECK_EVERY` of the tick's time per process and store, the last answer repeated in
between, as :mod:`alma_schedule.run_queue_watch` does), and, when ``alert_webhook`` is set, the
alerts to send (``Store.take_alerts``: each fire once per lease) handed to the dispatcher's
``send_alerts`` (an ``alma_schedule.alert`` message on the collect queue; the tick never posts).

docs/architecture.md, section "The modules, in detail" (engine/overdue.py).
"""

from __future__ import annotations

import logging
import threading
import weakref
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from alma_schedule.model import TickError
from alma_schedule.model.overdue import OverdueFire
from alma_schedule.policies.overdue import ALERT_LEASE

if TYPE_CHECKING:
    from .runtime import Runtime

log = logging.getLogger("alma_schedule.engine")

__all__ = ["CHECK_EVERY", "LIMIT", "OverdueCheck", "overdue_step"]

#: The tick asks the store at most this often (of the tick's time) per process and store.
CHECK_EVERY = timedelta(seconds=10)
#: How many overdue fires a tick report names (and alerts it takes) at most.
LIMIT = 100
STEP = "<overdue>"


@dataclass
class OverdueCheck:
    """When this process last asked the store, and its answer."""

    asked_at: datetime | None = None
    fires: tuple[OverdueFire, ...] = ()
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


_CHECKS: weakref.WeakKeyDictionary[Any, OverdueCheck] = weakref.WeakKeyDictionary()
_CHECKS_LOCK = threading.Lock()


def _check_of(store: Any) -> OverdueCheck:
    with _CHECKS_LOCK:
        check = _CHECKS.get(store)
        if check is None:
            check = _CHECKS[store] = OverdueCheck()
        return check


def _due(check: OverdueCheck, at: datetime) -> bool:
    last = check.asked_at
    return last is None or not last <= at < last + CHECK_EVERY


def overdue_step(rt: Runtime, at: datetime, errors: list[TickError]) -> tuple[OverdueFire, ...]:
    """The overdue fires a tick at ``at`` reports; alerts taken and sent when ``alert_webhook`` is set.
    A failing read or send is an error of the report, never raised."""
    check = _check_of(rt.store)
    with check.lock:
        if not _due(check, at):
            return check.fires
        try:
            fires = tuple(rt.store.overdue(at, LIMIT))
        except Exception as exc:  # the tick's report never fails for this read
            errors.append(TickError(STEP, f"overdue: {type(exc).__name__}: {exc}"[:300]))
            return check.fires
        check.asked_at, check.fires = at, fires
    if fires:
        log.warning("tick %s: %d overdue fire(s), e.g. %s", at.isoformat(), len(fires), fires[0].key)
    if rt.settings.alert_webhook:
        _send_alerts(rt, at, fires, errors)
    return fires


def _send_alerts(rt: Runtime, at: datetime, fires: tuple[OverdueFire, ...], errors: list[TickError]) -> None:
    send = getattr(rt.dispatcher, "send_alerts", None)
    waiting = [f for f in fires if f.delivered_at is None]
    if send is None or not waiting:
        return
    try:
        taken = rt.store.take_alerts(waiting, now=at, lease_until=at + ALERT_LEASE)
        if taken:
            send(taken)
    except Exception as exc:  # a lost send is sent again once its lease ends
        errors.append(TickError(STEP, f"alerts: {type(exc).__name__}: {exc}"[:300]))
