"""Step 1 of the tick (:mod:`.tick`): the live claims, ``claim_due`` in batches of ``claim_limit``,
each batch's claimed fires sent right after its commit.

The first batch runs alone. When it comes back full (more may be due) and the store can claim
concurrently (``store.claim_concurrency`` above 1: PostgreSQL, whose ``FOR UPDATE SKIP LOCKED`` hands
concurrent batches disjoint routines), the remaining batches run on up to ``tick_claim_workers``
threads at once, each batch still ONE store transaction on its own pooled connection: while one
batch's statements execute in the database, the next batch's rows are decided in Python. Nothing
of the protocol moves: a batch is the same transaction as when batches run one after another, a
fire is sent only after the commit of the batch that claimed it, every due fire is claimed by one
batch (the row locks decide, exactly as between two tick workers), and the whole step stops at
the first short batch (or the first batch after which the store saw nothing else due:
``ClaimScan.exhaust``, PostgreSQL's full first batch asks in its INSERT) or after
``tick_max_batches`` batches in all. The batches of one tick share
one :class:`~alma_schedule.model.ClaimScan`: on PostgreSQL a batch starts past the rows the
batches before it locked (never walking them again) and a short batch's check for held rows leaves
the rows the tick's other open batches hold to them. The one difference is order:
two batches' messages may leave in either order (nothing downstream relies on the order of fires
of different routines; one routine's fires are never in two batches of one tick at once, as its
row is locked by one of them). SQLite and the memory store have one writer: their batches run one
after another (``claim_concurrency`` 1), as with ``tick_claim_workers = 1``.

Sends are serialized (one lock: a broker connection is not thread-safe). The claims of a LAST batch
(short, or exhausted) are held in the tick's outbox instead: they leave once the end of the tick has
started (:mod:`.outbox`), still after their commit and before any other store step. A failing send is one
``<dispatcher>`` entry in the tick's errors (the claimed rows stay claimed; re-sends recover
them). An exception from the store (it is down) stops the other batches after their current one
and is raised by :func:`claim_live`, as from the loop it replaces. Python's cyclic garbage
collector is paused for the whole step (:mod:`.collector`: the batches' objects die by reference
counting before any collection walks them).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime

from alma_schedule.model import ClaimBatch, ClaimScan, Decision, Routine, TickError

from . import collector
from .outbox import Outbox, send_logged
from .runtime import Runtime

log = logging.getLogger("alma_schedule.engine")

__all__ = ["Claims", "claim_live"]


@dataclass
class Claims:
    """The batches of one tick's live claims, in the order they were started, and the send errors."""

    batches: list[ClaimBatch] = field(default_factory=list)
    errors: list[TickError] = field(default_factory=list)

    @property
    def deferred(self) -> bool:
        return any(b.deferred for b in self.batches)


def _short(batch: ClaimBatch, limit: int) -> bool:
    """Fewer rows than ``limit`` were due: the last batch."""
    return len(batch.claimed) + len(batch.skipped) + len(batch.deferred) + len(batch.buffered) < limit


def claim_live(
    rt: Runtime, at: datetime, decide: Callable[[Routine], Decision], outbox: Outbox | None = None
) -> Claims:
    """``claim_due`` batches until one comes back short (at most ``tick_max_batches``), each batch's
    claims sent after its commit; concurrently past the first batch where the store allows it. The
    cyclic garbage collector is paused meanwhile (``tick_gc_pause``, :mod:`.collector`). With an
    ``outbox``, the claims of a LAST batch (short, or after which the store saw nothing else due)
    are held in it instead (the tick sends them once the end of the tick has started: :mod:`.outbox`)."""
    with collector.paused(rt.settings.tick_gc_pause):
        return _claim_live(rt, at, decide, outbox)


def _claim_live(rt: Runtime, at: datetime, decide: Callable[[Routine], Decision], outbox: Outbox | None) -> Claims:
    store, s = rt.store, rt.settings
    out = Claims()
    sending = threading.Lock()
    scan = ClaimScan()  # this tick's batches: one scan of the due routines (the store may use it)

    def last(batch: ClaimBatch) -> bool:  # short, or the store saw nothing else due
        return _short(batch, s.claim_limit) or scan.exhausted

    def one() -> ClaimBatch:
        batch = store.claim_due(at, s.claim_limit, decide, rt.timers, scan)
        with sending:
            if outbox is not None and last(batch):
                outbox.hold("run", rt.dispatcher.send_runs, batch.claimed)
                return batch
            err = send_logged("run", rt.dispatcher.send_runs, batch.claimed)
            if err:
                out.errors.append(err)
        return batch

    first = one()
    out.batches.append(first)
    left = s.tick_max_batches - 1
    workers = min(s.tick_claim_workers, store.claim_concurrency, left)
    if left <= 0 or last(first):
        return out
    if workers <= 1:
        for _ in range(left):
            batch = one()
            out.batches.append(batch)
            if last(batch):
                break
        return out
    capture = getattr(rt.dispatcher, "caller_context", None)  # the tick's sends' context, into the threads
    context = capture() if capture is not None else nullcontext
    out.batches.extend(_concurrently(one, left, workers, last, context))
    return out


def _concurrently(
    one: Callable[[], ClaimBatch],
    left: int,
    workers: int,
    last: Callable[[ClaimBatch], bool],
    context: Callable[[], AbstractContextManager[None]] = nullcontext,
) -> list[ClaimBatch]:
    """Up to ``left`` batches on ``workers`` threads; no batch starts after the ``last`` one returned
    or a batch raised. The batches in the order they were started; the first exception raised."""
    state = threading.Lock()
    started: list[ClaimBatch | None] = []
    failures: list[BaseException] = []
    done = False

    def work() -> None:
        nonlocal done
        while True:
            with state:
                if done or len(started) >= left:
                    return
                slot = len(started)
                started.append(None)
            try:
                batch = one()
            except BaseException as exc:
                with state:
                    failures.append(exc)
                    done = True
                return
            with state:
                started[slot] = batch
                done = done or last(batch)

    def run() -> None:
        with context():
            work()

    threads = [threading.Thread(target=run, name=f"alma-claim-{i}", daemon=True) for i in range(workers)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except BaseException:  # the task's soft time limit, in this thread: no batch starts after it
        with state:
            done = True
        raise
    if failures:
        raise failures[0]
    return [b for b in started if b is not None]
