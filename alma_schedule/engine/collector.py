"""Python's cyclic garbage collector, paused while a tick claims (:func:`paused`; setting
``tick_gc_pause``): the batches' objects die by reference counting before a collection walks them.
Nested and concurrent pauses share one; the collector resumes when the last leaves, only if it was on
(docs/architecture.md, section "The flow, from clock to ledger").
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused"]

_lock = threading.Lock()
_depth = 0
_restore = False


@contextmanager
def paused(enabled: bool = True) -> Iterator[None]:
    """The cyclic collector off inside (nested and concurrent uses share one pause); ``enabled``
    false: a no-op."""
    global _depth, _restore
    if not enabled:
        yield
        return
    with _lock:
        if _depth == 0:
            _restore = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _restore:
                gc.enable()
