"""A clock that wakes at the next due instant: the wake-up hint read fresh, a heartbeat, a poll.

docs/architecture.md, section "The modules, in detail" (waker.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from alma_schedule.policies.wake import Wake, WakeRules, decide_wake

if TYPE_CHECKING:
    from alma_schedule.settings import Settings

log = logging.getLogger("alma_schedule.clock")

#: Reads the hint strictly after an instant (``Store.peek_wake``).
HintReader = Callable[[datetime], "datetime | None"]


def rules_of(settings: Settings) -> WakeRules:
    return WakeRules(settings.tick_period, settings.hint_poll, settings.min_wake_interval)


class Waker:
    """One clock's memory and its reading of the hint (not thread-safe: one clock, one thread)."""

    def __init__(self, rules: WakeRules, hint: HintReader | None) -> None:
        self.rules = rules
        self._hint = hint
        self._last_sent_at: datetime | None = None
        self._last_for: datetime | None = None
        self._failing = False

    def check(self, now: datetime) -> Wake:
        """Read the hint (after the instant last ticked for) and decide at ``now``."""
        return decide_wake(now, self._read(), last_sent_at=self._last_sent_at, rules=self.rules)

    def sent(self, wake: Wake, now: datetime) -> None:
        """Record that a tick for ``wake`` was sent (or attempted) at ``now``."""
        self._last_sent_at = now
        self._last_for = wake.woken_for or now

    def _read(self) -> datetime | None:
        if self._hint is None or self._last_for is None:
            return None
        try:
            value = self._hint(self._last_for)
        except Exception as exc:  # advisory: a store that cannot answer costs the hint, never the clock
            if not self._failing:
                log.warning(
                    "no wake-up hint (%s: %s): ticking on the heartbeat (ALMA_TICK_PERIOD) until the store answers",
                    type(exc).__name__,
                    str(exc).splitlines()[0][:200] if str(exc) else "",
                )
                self._failing = True
            return None
        if self._failing:
            log.warning("the wake-up hint is readable again: ticking at the next due instant")
            self._failing = False
        return value


def store_hint(settings: Settings) -> HintReader:
    """A reader of the hint through a store opened lazily from ``settings`` (re-opened after a failure)."""
    holder: dict[str, Any] = {}

    def read(after: datetime) -> datetime | None:
        store = holder.get("store")
        if store is None:
            from alma_schedule.stores import open_store

            store = holder["store"] = open_store(settings.database_url, schema=settings.database_schema)
        try:
            value: datetime | None = store.peek_wake(after)
        except Exception:
            holder.pop("store", None)
            try:
                store.close()
            except Exception:  # an already broken store
                pass
            raise
        return value

    return read


Send = Callable[[Wake], object]


def follow_clock(settings: Settings, stop_event: threading.Event, send: Send, hint: HintReader | None) -> int:
    """Tick at the hint, at least once per heartbeat, re-reading the hint every ``hint_poll``,
    until ``stop_event`` is set; ``send(wake)`` publishes one tick (an exception is logged, and the
    next tick is tried after one poll). Returns how many ticks were sent."""
    waker = Waker(rules_of(settings), hint)
    sent = 0
    while not stop_event.is_set():
        now = settings.time_source()
        wake = waker.check(now)
        if not wake.due:
            stop_event.wait(max(0.0, (wake.at - settings.time_source()).total_seconds()))
            continue
        waker.sent(wake, now)
        try:
            send(wake)
            sent += 1
        except Exception as exc:
            log.warning("tick not sent (%s): the next one is tried after %s", type(exc).__name__, settings.hint_poll)
            stop_event.wait(settings.hint_poll.total_seconds())
    return sent


def tick_kwargs(wake: Wake) -> dict[str, Any]:
    """The tick message's keyword arguments for ``wake`` (``woken_for``: the instant it acts for)."""
    return {} if wake.woken_for is None else {"woken_for": wake.woken_for.isoformat()}


def wait_for_instant(woken_for: datetime, clock: Callable[[], datetime], tolerance: timedelta) -> datetime:
    """Where a tick woken for ``woken_for`` arrives early (its worker's clock trails the clock's host
    by at most ``tolerance``), wait for that instant once; return the worker's clock after it. A tick
    never claims early: the instant it claims at is always the worker's own clock."""
    import time

    current = clock()
    ahead = woken_for - current
    if timedelta(0) < ahead <= tolerance:
        time.sleep(ahead.total_seconds())
        current = clock()
    elif ahead > tolerance:
        log.warning(
            "a tick woken for %s arrived %.3fs before it (more than ALMA_CLOCK_TOLERANCE): it claims at %s",
            woken_for.isoformat(),
            ahead.total_seconds(),
            current.isoformat(),
        )
    return current
