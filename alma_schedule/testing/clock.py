"""A settable clock for tests, demos and simulations: ``Settings(clock=SimClock(t0))``.

The engine reads time only through ``Settings.clock``, so a simulation moves this clock and every
``now`` default, clamp and expiry follows it. Thread-safe (tickers and workers read it concurrently).
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta


class SimClock:
    """Returns ``at`` when called; ``set`` and ``advance`` move it (both return the new instant)."""

    def __init__(self, at: datetime) -> None:
        self._at = at
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self._at

    @property
    def at(self) -> datetime:
        return self()

    @at.setter
    def at(self, value: datetime) -> None:
        self.set(value)

    def set(self, at: datetime) -> datetime:
        with self._lock:
            self._at = at
            return at

    def advance(self, delta: timedelta) -> datetime:
        with self._lock:
            self._at += delta
            return self._at
