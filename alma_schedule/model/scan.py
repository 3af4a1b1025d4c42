"""One tick's live claim batches as ONE scan of the due routines: :class:`ClaimScan`.

The tick (``engine/claims.py``) makes one per tick and passes it to each of its ``claim_due``
batches, which may run on several threads at once. A store may use it to start each batch where the
batches before it stopped, and to tell the due rows that a batch of the same tick holds from the ones
another transaction holds (PostgreSQL does both: ``stores/sql/store_tick.py``), and to say that
nothing else is due (``exhaust``: the tick then starts no further batch after a full one, where it
would otherwise learn it only from an empty batch); a store that claims one batch at a time over its
own memory may ignore it. It never changes what is claimed:
every due fire is still claimed once, by one batch (docs/architecture.md, "the tick").
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime

__all__ = ["ClaimScan", "DueKey"]

#: A routine's place in the due order: ``(next_due_at, org, uid, routine_id)``.
DueKey = tuple[datetime, str, str, str]


class ClaimScan:
    """Thread-safe. ``token()`` names one batch's transaction; ``open(token, keys)`` records the rows
    it locked (in due order); ``others(token)``: the routine keys ``(org, uid, routine_id)`` locked
    by the OTHER batches still open; ``close(token)`` when its transaction has ended (committed or
    not). ``after``: the greatest last :data:`DueKey` a batch recorded (None before the first),
    compared in Python's order: any batch's last key is a safe start for a later one (every due row
    before it was locked by a batch or passed over while another transaction held it). ``exhausted``:
    a batch's own transaction, before its commit, found no due routine but those it decided and
    those the scan's other open batches hold (:meth:`exhaust`): no further batch would find one."""

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
