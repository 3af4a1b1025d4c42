"""One tick's live claim batches as ONE scan of the due routines: :class:`ClaimScan`.
docs/architecture.md, section "The modules, in detail" (model/scan.py).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime

__all__ = ["ClaimScan", "DueKey"]

#: A routine's place in the due order: ``(next_due_at, org, uid, routine_id)``.
DueKey = tuple[datetime, str, str, str]


class ClaimScan:
    """One tick's claim batches as one scan of the due routines; thread-safe.
    ``token()`` names a batch, ``open``/``close`` bracket its transaction, ``others`` and ``after`` tell a
    store where to start and what other batches hold, ``exhausted`` says no further batch would find one.
    docs/architecture.md, section "The modules, in detail" (model/scan.py).
    """

    __slots__ = ("_after", "_exhausted", "_lock", "_next", "_open")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._after: DueKey | None = None
        self._open: dict[int, Sequence[DueKey]] = {}
        self._next = 0
        self._exhausted = False

    @property
    def after(self) -> DueKey | None:
        with self._lock:
            return self._after

    @property
    def exhausted(self) -> bool:
        with self._lock:
            return self._exhausted

    def exhaust(self) -> None:
        """Nothing else is due: the tick starts no further batch (those already started still end)."""
        with self._lock:
            self._exhausted = True

    def token(self) -> int:
        with self._lock:
            self._next += 1
            return self._next

    def open(self, token: int, keys: Sequence[DueKey]) -> None:
        with self._lock:
            self._open[token] = keys
            if keys and (self._after is None or keys[-1] > self._after):
                self._after = keys[-1]

    def others(self, token: int) -> list[tuple[str, str, str]]:
        with self._lock:
            return [(k[1], k[2], k[3]) for t, keys in self._open.items() if t != token for k in keys]

    def close(self, token: int) -> None:
        with self._lock:
            self._open.pop(token, None)
