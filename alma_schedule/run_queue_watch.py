"""Whether anything consumes the run queue: a run claimed and due more than ``ALMA_HEARTBEAT_MAX_AGE``
ago that no worker started says nothing has consumed it for that long. The tick report, ``plan`` and
``GET /healthz`` carry the one line; ``now`` is always a parameter.

docs/architecture.md, section "The modules, in detail" (run_queue_watch.py).
"""

from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from alma_schedule.setting_values import seconds_text

if TYPE_CHECKING:
    from alma_schedule.settings import Settings

#: The tick asks at most this often per process (seconds of the monotonic clock): one indexed read.
TICK_CHECK_EVERY = 30.0


def unconsumed(store: Any, now: datetime, settings: Settings, *, detail: bool = True) -> str | None:
    """The one line saying nothing has consumed ``settings.run_queue`` for ``heartbeat_max_age``
    (``detail``: with the oldest waiting run's key; the open ``/healthz`` says no key), or None."""
    found = store.unstarted(now, settings.heartbeat_max_age, 1)
    if not found:
        return None
    oldest = found[0]
    waiting = f": run {oldest.key} was sent at {oldest.state_at.isoformat()} and no worker started it" if detail else ""
    return (
        f"nothing has consumed {settings.run_queue} for ALMA_HEARTBEAT_MAX_AGE "
        f"({seconds_text(settings.heartbeat_max_age)}){waiting}; start a worker that serves {settings.run_queue} "
        "(a plain `celery -A proj worker -n worker@%h` of a JSON-only app does)"
    )


class TickWatch:
    """:func:`unconsumed` for the tick task, asked at most every :data:`TICK_CHECK_EVERY` seconds per
    process (the tick stays one probe when idle); the last answer is repeated in between."""

    def __init__(self, every: float = TICK_CHECK_EVERY) -> None:
        self.every = every
        self._lock = threading.Lock()
        self._asked_at: float | None = None
        self._line: str | None = None

    def line(self, store: Any, now: datetime, settings: Settings) -> tuple[str | None, bool]:
        """The line (None: runs are consumed) and whether it was read now (log it then, not every tick)."""
        with self._lock:
            fresh = self._asked_at is None or time.monotonic() - self._asked_at >= self.every
            if fresh:
                self._asked_at = time.monotonic()
        if not fresh:
            return self._line, False
        try:
            line = unconsumed(store, now, settings)
        except Exception:  # the tick's report never fails for this read
            return self._line, False
        with self._lock:
            self._line = line
        return line, True
